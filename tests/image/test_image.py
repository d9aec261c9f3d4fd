"""The container image runs both roles the way a pod does: uid 65532, read-only root, writable /tmp only.

Builds the image once per source change (``e2e/imagebuild``; a current image is reused in well under a
second). Without podman the tests skip on a developer machine; under ``CI`` they fail instead, because
the suite installs podman there and a silent skip would hide a broken image.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dataplane_checks import check_partition

from imagebuild import build, podman, settings, smoke
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout

pytestmark = pytest.mark.image


def test_the_tag_matches_the_project_version_and_the_manifests(image: str) -> None:
    from streamapp.render import manifests

    assert image == f"streamapp:{settings.version()}" == manifests.IMAGE
    assert build.is_current(image), "a second ensure_image would rebuild"


def test_version_is_printed(image: str) -> None:
    assert smoke.version_output() == f"streamapp {settings.version()}"


def test_image_runs_as_the_non_root_user_of_the_deployment(image: str) -> None:
    info = podman.image_info(image)
    assert info is not None
    config = info.get("Config")
    assert isinstance(config, dict)
    assert config.get("User") == f"{settings.RUNTIME_UID}:{settings.RUNTIME_UID}"
    assert smoke.run_in_image(["id", "-u"], timeout=120).stdout.strip() == str(settings.RUNTIME_UID)


def test_both_roles_start_on_a_read_only_root(image: str) -> None:
    """Each role's command parses its options, importing kopf/kubernetes and the executor agent."""
    assert "--all-namespaces" in smoke.run_in_image(["streamapp", "operator", "--help"]).stdout
    assert "--from-cluster" in smoke.run_in_image(["streamapp", "executor", "--help"]).stdout


def test_executor_commits_every_record_exactly_once_in_the_image(image: str, tmp_path: Path) -> None:
    """A few micro-batches per partition through PySpark in the container, checked from the host."""
    smoke.generate_input(tmp_path, count=2000, keys=20, seed=1)
    status = smoke.run_dataplane(tmp_path, max_batch_records=300)

    assert {row["partition"]: row["backlog"] for row in status} == {0: 0, 1: 0}
    assert smoke.uncommitted(tmp_path, status) == {}
    state = StateLayout(tmp_path / "state")
    log = FileLog(tmp_path / "log")
    for partition in range(smoke.PARTITIONS):
        assert check_partition(state, tmp_path / "state" / "outputs", log, partition) >= 3
        assert {found.owner for found in accepted_manifests(state, partition)} == {"m0"}
    written = [p for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert written and all(p.stat().st_uid == settings.RUNTIME_UID for p in written)
