"""The image builds the way a user builds it, and a pipeline image built from it runs its own code.

No registry is reachable here, so the public default base (Debian bookworm-slim) cannot be pulled: the
build from the repository root runs on the tests' local base through the same ``BASE_IMAGE`` argument
a user would leave at its default, with the context ``.dockerignore`` selects.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagebuild import base, context, podman, settings, smoke
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.replica import rebuild

pytestmark = pytest.mark.image

PIPELINE_DIR = settings.IMAGES_DIR / "pipeline"
PIPELINE = "mypipeline.transforms:amount_per_key"


def build(args: list[str], cwd: Path, secrets: dict[str, Path]) -> None:
    command = podman.command(
        "build",
        "--pull=never",
        "--layers",
        *podman.ulimit_args(),
        *(f"--secret=id={name},src={path}" for name, path in secrets.items()),
        *args,
    )
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"podman build failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"


@pytest.fixture
def throwaway_tag() -> Iterator[str]:
    tag = f"localhost/streamapp-test:{uuid.uuid4().hex[:8]}"
    try:
        yield tag
    finally:
        podman.run(["rmi", "--force", tag], check=False)


def test_the_default_base_is_public() -> None:
    match = re.search(r"^ARG BASE_IMAGE=(\S+)$", settings.CONTAINERFILE.read_text(), re.MULTILINE)
    assert match is not None and match.group(1) == "docker.io/library/debian:bookworm-slim"


def test_the_containerfile_builds_from_the_repository_root(
    image: str, throwaway_tag: str, tmp_path: Path
) -> None:
    """``podman build -f images/Containerfile .`` at the root: the dependency layer comes from the
    cache (same requirements), the package layer runs on the root's context."""
    base_ref, _ = base.ensure_base()
    build(
        [
            f"--build-arg=BASE_IMAGE={base_ref}",
            f"--build-arg=REQUIREMENTS_HASH={context.requirements_digest()}",
            f"--build-arg=SOURCE_HASH=root-{uuid.uuid4().hex}",  # the package layer really runs
            f"--tag={throwaway_tag}",
            "--file=images/Containerfile",
            ".",
        ],
        settings.REPO,
        context.pip_secrets(tmp_path),
    )
    shown = smoke.run_in_image(["streamapp", "--version"], timeout=120, image=throwaway_tag).stdout
    assert shown.strip() == f"streamapp {settings.version()}"


def test_a_pipeline_image_from_ours_runs_its_own_transform(
    image: str, throwaway_tag: str, tmp_path: Path
) -> None:
    """``images/pipeline`` (the recipe the README points at) built FROM the image: its module is found
    by the executor, whose committed state is each key's total of the amounts in the input."""
    build([f"--build-arg=STREAMAPP_IMAGE={image}", f"--tag={throwaway_tag}", "."], PIPELINE_DIR, {})
    data = tmp_path / "data"
    smoke.generate_input(data, count=1200, keys=15, seed=3)
    status = smoke.run_dataplane(data, max_batch_records=400, image=throwaway_tag, pipeline=PIPELINE)
    assert smoke.uncommitted(data, status) == {}
    log, state = FileLog(data / "log"), StateLayout(data / "state")
    for partition in range(smoke.PARTITIONS):
        records = log.read_arrow(partition)
        expected: dict[str, float] = defaultdict(float)
        for key, value in zip(
            records.column("key").to_pylist(), records.column("value").to_pylist(), strict=True
        ):
            expected[key] += float(value)
        assert rebuild(state, partition).state.values == pytest.approx(dict(expected))
