"""``make kind-test`` cannot run here (no Docker, no registry for kind's node image), so what can be
checked without it is: the kind scripts pass shellcheck, ``node-tests.sh --dry-run`` prints the whole
sequence (build, cluster with the volumes mount, load, the tier with kind selected, delete), and what the
script hands the tier is what :mod:`kindnode` reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import kindnode
from imagebuild import settings
from localcluster.controlplane import REPO_ROOT

KIND = REPO_ROOT / "e2e" / "kind"
SCRIPT = KIND / "node-tests.sh"


def test_the_kind_scripts_pass_shellcheck() -> None:
    shellcheck = Path(sys.executable).parent / "shellcheck"
    scripts = sorted(str(p) for p in KIND.glob("*.sh"))
    assert SCRIPT.as_posix() in scripts
    done = subprocess.run([str(shellcheck), *scripts], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def dry_run(*pytest_args: str) -> list[str]:
    env = {**os.environ, "KIND_CLUSTER_NAME": "dry", "KIND_NODE_IMAGE": "kindest/node:v9.9.9"}
    done = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", *pytest_args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.splitlines()


def commands(lines: list[str]) -> list[str]:
    return [line.removeprefix("+ ") for line in lines if line.startswith("+ ")]


def test_the_dry_run_builds_creates_loads_runs_the_tier_on_kind_and_deletes_the_cluster() -> None:
    state = REPO_ROOT / ".cluster-kind" / "dry"
    tag = settings.image_tag()
    printed = commands(dry_run("-k", "killed"))
    python = REPO_ROOT / ".venv" / "bin" / "python"
    assert printed == [
        f"docker build -f {REPO_ROOT}/images/Containerfile -t {tag} {REPO_ROOT}",
        f"mkdir -p {state}/volumes",
        f"cat > {state}/kind.yaml <<EOF",
        f"kind create cluster --name dry --image kindest/node:v9.9.9 --config {state}/kind.yaml --wait 180s",
        f"kind get kubeconfig --name dry > {state}/kubeconfig",
        f"kind load docker-image {tag} --name dry",
        f"env STREAMAPP_NODE=kind STREAMAPP_KIND_CLUSTER=dry STREAMAPP_KIND_DIR={state} STREAMAPP_IMAGE={tag}"
        f" {python} -m pytest -m node tests/node -k killed",
        "kind delete cluster --name dry",
    ]


def test_the_kind_cluster_mounts_the_volumes_directory_where_the_tier_looks_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = dry_run()
    start = next(i for i, line in enumerate(lines) if line.startswith("+ cat > "))
    end = lines.index("EOF", start)
    cluster = yaml.safe_load("\n".join(lines[start + 1 : end]))
    (node,) = cluster["nodes"]
    assert node["role"] == "control-plane"
    state = REPO_ROOT / ".cluster-kind" / "dry"
    monkeypatch.setenv(kindnode.SELECT_ENV, "kind")
    monkeypatch.setenv(kindnode.CLUSTER_ENV, "dry")
    monkeypatch.setenv(kindnode.STATE_ENV, str(state))
    selected = kindnode.selected()
    assert selected is not None
    assert node["extraMounts"] == [
        {"hostPath": str(selected.volumes), "containerPath": str(selected.volumes)}
    ]
    assert f"kind get kubeconfig --name dry > {selected.kubeconfig}" in commands(lines)


def test_ctr_runs_inside_the_kind_node_in_the_kubelets_namespace() -> None:
    node = kindnode.KindNode("dry", Path("/x"))
    assert node.ctr_argv("tasks", "kill", "c1") == [
        "docker",
        "exec",
        "dry-control-plane",
        "ctr",
        "--namespace=k8s.io",
        "tasks",
        "kill",
        "c1",
    ]


def test_kind_is_chosen_only_when_asked_and_a_half_set_environment_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(kindnode.SELECT_ENV, raising=False)
    assert kindnode.selected() is None
    monkeypatch.setenv(kindnode.SELECT_ENV, "kind")
    monkeypatch.delenv(kindnode.STATE_ENV, raising=False)
    monkeypatch.setenv(kindnode.CLUSTER_ENV, "dry")
    with pytest.raises(RuntimeError, match=kindnode.STATE_ENV):
        kindnode.selected()
