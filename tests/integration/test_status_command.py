"""`streamapp status` and `kubectl streamapp status` read an app's table from the real API server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kubernetes import client
from operator_support import APP, Operators, create_app

from localcluster import build
from localcluster.waiting import wait_for
from streamapp.api.names import APP_LABEL, GROUP, MEMBERS, VERSION


def test_the_status_table_from_the_api_alone(
    api_client: client.ApiClient, kubeconfig_path: Path, namespace: str, operators: Operators
) -> None:
    operators.start()
    create_app(api_client, namespace, replicas=2, partitions=4)
    custom = client.CustomObjectsApi(api_client)

    def owners() -> dict[str, str] | None:
        """Task → owner as the member targets say, once every task is placed. No executor runs here,
        so nothing moves after the first plan: whether it split the tasks depends on whether the
        second pod was ready by then, and the table is judged against the targets, not a split."""
        found = custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, MEMBERS, label_selector=f"{APP_LABEL}={APP}"
        )
        placed = {
            str(task["task"]): f"m{member['spec']['memberId']}"
            for member in found["items"]
            for task in member.get("spec", {}).get("active") or []
        }
        return placed if len(placed) == 4 else None

    expected = wait_for(owners, 120, "every task placed")
    command = [sys.executable, "-m", "streamapp.cli", "status", APP, "-n", namespace]
    done = subprocess.run(
        [*command, "--kubeconfig", str(kubeconfig_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line[:4].strip().isdigit()]
    assert [row[0] for row in rows] == ["0", "1", "2", "3"]
    assert {row[0]: row[1] for row in rows} == expected, done.stdout
    assert "m0  " in done.stdout and "m1  " in done.stdout, "both members listed"

    # As a kubectl plugin: kubectl finds kubectl-streamapp on the PATH (the console script).
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    kubectl = str(build.bin_dir() / "kubectl")
    plugin = subprocess.run(
        [kubectl, "streamapp", "status", APP, "-n", namespace],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert plugin.returncode == 0, plugin.stdout + plugin.stderr
    assert plugin.stdout.startswith(f"{namespace}/{APP}  replicas "), plugin.stdout

    missing = subprocess.run(
        [*command[:-3], "nothing", "-n", namespace, "--kubeconfig", str(kubeconfig_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "404" in missing.stdout
