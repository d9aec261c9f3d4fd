"""Run the image the way Kubernetes runs it: uid 65532, read-only root filesystem, only /tmp writable.

``run_dataplane`` has the executor process a file log mounted from the host for a fixed assignment
until idle, so the host can check what it committed (tests/image/test_image.py) — the same data plane
the member pods run, inside the real image.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from imagebuild import podman, settings

MOUNT = "/data"
COUNTS = "streamapp.executor.samples.counts:counts"
PARTITIONS = 2
RUN_TIMEOUT_S = 900.0


def pod_like_args(mounts: dict[Path, str] | None = None) -> list[str]:
    """``podman run`` options matching the Deployment's securityContext (plus an emptyDir at /tmp).

    ``:U`` hands the mounted host directory to the container user, as fsGroup would in a pod.
    """
    volumes = [f"--volume={host}:{inside}:U" for host, inside in (mounts or {}).items()]
    return [
        "--rm",
        f"--user={settings.RUNTIME_UID}:{settings.RUNTIME_UID}",
        "--read-only",
        "--read-only-tmpfs=false",
        "--tmpfs=/tmp:rw,mode=1777",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        *podman.ulimit_args(),
        *volumes,
    ]


def run_in_image(
    args: Sequence[str],
    mounts: dict[Path, str] | None = None,
    timeout: float = RUN_TIMEOUT_S,
    image: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command in the image (or an ``image`` built from it), pod-like; raises with its output
    when it fails."""
    command = podman.command("run", *pod_like_args(mounts), image or settings.image_tag(), *args)
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(args)} failed in the image (exit {result.returncode}):\n"
            f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-8000:]}"
        )
    return result


def version_output() -> str:
    """What ``streamapp --version`` prints inside the image."""
    return run_in_image(["streamapp", "--version"], timeout=120).stdout.strip()


def generate_input(data: Path, count: int = 2000, keys: int = 20, seed: int = 1) -> None:
    """Write the input log on the host (with the host's streamapp), as the tests read it back."""
    from streamapp.executor.io.generate import GenerateSpec, generate
    from streamapp.executor.io.source import FileLog

    generate(FileLog(data / "log"), GenerateSpec(partitions=PARTITIONS, count=count, keys=keys, seed=seed))


def run_dataplane(
    data: Path, max_batch_records: int = 300, image: str | None = None, pipeline: str = COUNTS
) -> list[dict[str, Any]]:
    """Process ``data/log`` into ``data/state`` with ``pipeline`` inside the image until idle; returns
    the status JSON."""
    active = ",".join(f"{partition}=1" for partition in range(PARTITIONS))
    run_in_image(
        [
            "streamapp",
            "dataplane",
            f"--state={MOUNT}/state",
            f"--log={MOUNT}/log",
            f"--pipeline={pipeline}",
            f"--active={active}",
            "--member=m0",
            f"--max-batch-records={max_batch_records}",
            f"--status={MOUNT}/status.json",
            "--until-idle",
        ],
        mounts={data: MOUNT},
        image=image,
    )
    status: list[dict[str, Any]] = json.loads((data / "status.json").read_text())
    return status


def uncommitted(data: Path, status: list[dict[str, Any]]) -> dict[int, int]:
    """Partition → records of the input log the executor reported as not committed (empty: all done)."""
    from streamapp.executor.io.source import FileLog

    log = FileLog(data / "log")
    committed = {int(row["partition"]): int(row["committed_offset"]) for row in status}
    missing = {p: log.end_offset(p) - committed.get(p, 0) for p in range(PARTITIONS)}
    return {p: n for p, n in missing.items() if n}
