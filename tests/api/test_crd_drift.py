"""crds/ and manifests/ are exactly what the models generate; `--check` says when they are not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from streamapp.cli import main
from streamapp.render.apidocs import api_files
from streamapp.render.crd import crd_files
from streamapp.render.manifests import manifest_files
from streamapp.render.monitoring import monitoring_files

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("directory", "command", "generate"),
    [
        ("crds", "crd", crd_files),
        ("manifests", "manifests", manifest_files),
        ("docs", "api-docs", api_files),
        ("manifests/monitoring", "monitoring", monitoring_files),
    ],
)
def test_checked_in_files_match_the_model(
    directory: str, command: str, generate: Callable[[], dict[str, str]]
) -> None:
    for name, text in generate().items():
        path = ROOT / directory / name
        assert path.exists(), f"{path} is missing: run `streamapp {command} --write {directory}`"
        assert path.read_text() == text, (
            f"{path} drifted from what operator/streamapp/render writes: regenerate it with --write"
        )


def test_crd_file_names() -> None:
    assert sorted(crd_files()) == [
        "Kustomization",
        "streamapp.dev_streamappmembers.yaml",
        "streamapp.dev_streamapps.yaml",
    ]


def test_crds_holds_nothing_but_crds_for_kubectl_apply_f() -> None:
    """`kubectl apply -f crds/` reads every .yaml, .yml and .json file: each must be a CRD."""
    committed = {path.name for path in (ROOT / "crds").iterdir()}
    assert committed == set(crd_files()), "files in crds/ the generator does not write"
    for path in (ROOT / "crds").iterdir():
        if path.suffix in (".yaml", ".yml", ".json"):
            assert yaml.safe_load(path.read_text())["kind"] == "CustomResourceDefinition", path


def test_check_fails_with_a_diff_and_write_repairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crd", "--check", str(tmp_path)]) == 1
    assert main(["crd", "--write", str(tmp_path)]) == 0
    assert main(["crd", "--check", str(tmp_path)]) == 0
    target = tmp_path / "streamapp.dev_streamapps.yaml"
    target.write_text(target.read_text().replace("partitions is immutable", "partitions may change"))
    capsys.readouterr()
    assert main(["crd", "--check", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "-                  message: partitions may change" in captured.err
    assert "1 file(s)" in captured.out


def test_print_is_one_applicable_stream(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifests"]) == 0
    kinds = [doc["kind"] for doc in yaml.safe_load_all(capsys.readouterr().out)]
    assert kinds == [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRole",
        "ClusterRole",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    assert main(["crd"]) == 0
    crds = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [doc["metadata"]["name"] for doc in crds] == [
        "streamapps.streamapp.dev",
        "streamappmembers.streamapp.dev",
    ]
