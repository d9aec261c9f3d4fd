"""Start, reach and stop the test S3 server as a process whose record lives in a state directory."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from localcluster import processes
from localcluster.processes import ProcessRecord
from s3server import install

READY_TIMEOUT_S = 120.0
REGION = "us-east-1"
# moto accepts any signed request; these are what the tests put in the Secret like real credentials.
ACCESS_KEY = "streamapp-test"
SECRET_KEY = "streamapp-test-secret"


@dataclass(frozen=True)
class S3Server:
    """A running server: where it listens and how to stop it."""

    record: ProcessRecord
    port: int

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The standard AWS variables a client (boto3, an executor pod) needs to use this server."""
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        }


def _record_file(state_dir: Path) -> Path:
    return state_dir / "s3server.json"


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def start(state_dir: Path) -> S3Server:
    """Start a server on a free loopback port (installing it first if needed) and wait until it answers."""
    install.ensure_installed()
    stop(state_dir)  # one left by a session that died
    state_dir.mkdir(parents=True, exist_ok=True)
    port = processes.free_port()
    argv = [str(install.server_binary()), "-H", "127.0.0.1", "-p", str(port)]
    record = processes.spawn("s3server", argv, state_dir / "s3server.log")
    _record_file(state_dir).write_text(json.dumps({"record": record.to_json(), "port": port}))
    server = S3Server(record, port)
    try:
        processes.wait_until(lambda: _answers(port), READY_TIMEOUT_S, "the S3 server to answer", record)
    except BaseException:
        stop(state_dir)
        raise
    return server


def stop(state_dir: Path) -> bool:
    """Stop the server whose record `state_dir` holds; False when there was none."""
    path = _record_file(state_dir)
    if not path.exists():
        return False
    data = json.loads(path.read_text())
    processes.stop(ProcessRecord.from_json(data["record"]))
    path.unlink()
    return True
