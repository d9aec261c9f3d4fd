"""Start, reach and stop the test S3 server as a process whose record lives in a state directory."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path

from localcluster import processes
from localcluster.processes import ProcessRecord
from s3server import install

READY_TIMEOUT_S = 120.0
REGION = "us-east-1"
# The one identity the server knows (an admin); requests signed with anything else are refused.
ACCESS_KEY = "streamapp-test"
SECRET_KEY = "streamapp-test-secret"
_PORTS = ("master", "volume", "filer", "s3")


@dataclass(frozen=True)
class S3Server:
    """A running server: where it listens and how to stop it."""

    record: ProcessRecord
    port: int
    host: str = "127.0.0.1"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def at(self, host: str) -> S3Server:
        """The same server reached on another of its addresses (one in a network namespace listens on
        every address of its namespace)."""
        return replace(self, host=host)

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


def _answers(endpoint: str) -> bool:
    """The S3 gateway answers HTTP (403 to an unsigned request is an answer)."""
    try:
        with urllib.request.urlopen(f"{endpoint}/", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _writes(server: S3Server) -> bool:
    """A signed write goes through: the volume server has registered with the master and the filer
    reaches both (the gateway answers a moment before that)."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    client = boto3.session.Session().client(
        "s3",
        endpoint_url=server.endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    try:
        client.create_bucket(Bucket="streamapp-ready")
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in (
            "BucketAlreadyOwnedByYou",
            "BucketAlreadyExists",
        ):
            return False
    except BotoCoreError:
        return False
    try:
        client.put_object(Bucket="streamapp-ready", Key="probe", Body=b"ready")
    except (BotoCoreError, ClientError):
        return False
    return True


def argv(state_dir: Path, ports: dict[str, int], ip: str = "127.0.0.1", bind: str = "127.0.0.1") -> list[str]:
    """`weed mini` with every listener on a port of ours (gRPC ports too: the default, port + 10000,
    may be taken), the extras off (WebDAV, admin UI, Iceberg and Lance catalogs, telemetry) and the
    identity file that makes it check signatures; its parts reach each other on `ip` and listen on
    `bind` (loopback by default)."""
    config = state_dir / "s3-identities.json"
    identity = {
        "name": "streamapp-test",
        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    config.write_text(json.dumps({"identities": [identity]}))
    data = state_dir / "data"
    data.mkdir(exist_ok=True)
    command = [str(install.server_binary()), "mini", f"-dir={data}", f"-ip={ip}", f"-ip.bind={bind}"]
    for name in _PORTS:
        command += [f"-{name}.port={ports[name]}", f"-{name}.port.grpc={ports[name + '.grpc']}"]
    command += ["-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false"]
    command += ["-master.telemetry=false", f"-s3.config={config}"]
    return command


def start(state_dir: Path, netns: str | None = None, ip: str = "127.0.0.1") -> S3Server:
    """Start a server on free ports (building it first if needed) and wait until it takes writes: on
    loopback, or in network namespace `netns` listening on all its addresses, `ip` among them (the
    returned server's address)."""
    install.ensure_installed()
    stop(state_dir)  # one left by a session that died
    state_dir.mkdir(parents=True, exist_ok=True)
    names = [f"{name}{grpc}" for name in _PORTS for grpc in ("", ".grpc")]
    ports = dict(zip(names, processes.free_ports(len(names)), strict=True))
    command = argv(state_dir, ports, ip, "127.0.0.1" if netns is None else "0.0.0.0")
    if netns is not None:
        command = ["ip", "netns", "exec", netns, *command]  # exec: the server keeps the pid
    record = processes.spawn("s3server", command, state_dir / "s3server.log")
    port = ports["s3"]
    _record_file(state_dir).write_text(json.dumps({"record": record.to_json(), "port": port}))
    server = S3Server(record, port, ip)
    try:
        processes.wait_until(
            lambda: _answers(server.endpoint), READY_TIMEOUT_S, "the S3 server to answer", record
        )
        processes.wait_until(lambda: _writes(server), READY_TIMEOUT_S, "the S3 server to take writes", record)
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
