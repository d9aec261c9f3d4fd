"""Smoke tests of the control plane the integration tier runs on: each checks one behaviour the
operator relies on (namespaces, CRDs with CEL/status/scale, scheduling, garbage collection, RBAC) and
the process node's kubelet-like behaviour (real processes, exit codes, restarts, probes, termination).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from localcluster import processes, versions
from localcluster.nodes import KWOK_NODES, kwok_node_selector, process_node_selector, process_node_tolerations
from localcluster.waiting import wait_for

TIMEOUT_S = 60.0
CRD_GROUP = "e2e.streamapp.dev"
CEL_MESSAGE = "replicas must not exceed partitions"


def _gone(read: Any) -> bool:
    """True once ``read()`` answers 404."""
    try:
        read()
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def _condition(obj: Any, kind: str) -> str | None:
    for condition in obj.status.conditions or []:
        if condition.type == kind:
            return str(condition.status)
    return None


def test_apiserver_reports_pinned_version(api_client: client.ApiClient, local_cluster: Any) -> None:
    if local_cluster is None:
        pytest.skip("the pinned version applies to the local control plane only")
    info = client.VersionApi(api_client).get_code()
    assert info.git_version == versions.KUBERNETES


def test_namespace_create_and_delete_completes(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    name = f"ns-smoke-{os.getpid()}-{int(time.time())}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for(
        lambda: core.read_namespace(name).status.phase == "Active", TIMEOUT_S, f"namespace {name} Active"
    )
    core.create_namespaced_config_map(name, {"metadata": {"name": "content"}, "data": {"k": "v"}})
    core.delete_namespace(name)
    wait_for(lambda: _gone(lambda: core.read_namespace(name)), TIMEOUT_S, f"namespace {name} to be finalized")


def _widget_crd() -> dict[str, Any]:
    """A CRD shaped like StreamApp: status and scale subresources and a CEL rule across fields."""
    spec_schema = {
        "type": "object",
        "required": ["replicas", "partitions"],
        "properties": {
            "replicas": {"type": "integer", "minimum": 0},
            "partitions": {"type": "integer", "minimum": 1},
        },
        "x-kubernetes-validations": [{"rule": "self.replicas <= self.partitions", "message": CEL_MESSAGE}],
    }
    status_schema = {
        "type": "object",
        "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"}},
    }
    version = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": spec_schema, "status": status_schema},
            }
        },
        "subresources": {
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.selector",
            },
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{CRD_GROUP}"},
        "spec": {
            "group": CRD_GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [version],
        },
    }


def _delete_crd(extensions: client.ApiextensionsV1Api, name: str) -> None:
    """Delete a CRD (if present) and wait until it is gone, so a fresh one can be created."""
    try:
        extensions.delete_custom_resource_definition(name)
    except ApiException as error:
        if error.status != 404:
            raise
    wait_for(
        lambda: _gone(lambda: extensions.read_custom_resource_definition(name)), TIMEOUT_S, f"CRD {name} gone"
    )


@pytest.fixture(scope="module")
def widget_crd(api_client: client.ApiClient) -> Iterator[str]:
    """The Widget CRD, Established, shared by this module's tests; removed afterwards."""
    extensions = client.ApiextensionsV1Api(api_client)
    name = f"widgets.{CRD_GROUP}"
    _delete_crd(extensions, name)
    extensions.create_custom_resource_definition(_widget_crd())

    def established() -> bool:
        return _condition(extensions.read_custom_resource_definition(name), "Established") == "True"

    wait_for(established, TIMEOUT_S, f"CRD {name} Established")
    try:
        yield name
    finally:
        _delete_crd(extensions, name)


def _widget(name: str, replicas: int, partitions: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{CRD_GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "partitions": partitions},
    }


def test_crd_cel_rule_rejects_invalid_object(
    api_client: client.ApiClient, widget_crd: str, namespace: str
) -> None:
    objects = client.CustomObjectsApi(api_client)

    def create(body: dict[str, Any]) -> Any:
        return objects.create_namespaced_custom_object(CRD_GROUP, "v1", namespace, "widgets", body)

    wait_for(
        lambda: _try_create(create, _widget("valid", 2, 4)), TIMEOUT_S, "the Widget resource to be served"
    )
    with pytest.raises(ApiException) as rejected:
        create(_widget("invalid", 5, 4))
    assert rejected.value.status == 422
    assert CEL_MESSAGE in str(rejected.value.body)


def _try_create(create: Any, body: dict[str, Any]) -> bool:
    """Create, treating 404 as "the new resource is not served yet" (discovery lags Established)."""
    try:
        create(body)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_crd_scales_through_scale_subresource(
    api_client: client.ApiClient, widget_crd: str, namespace: str
) -> None:
    objects = client.CustomObjectsApi(api_client)
    args = (CRD_GROUP, "v1", namespace, "widgets")
    wait_for(
        lambda: _try_create(lambda b: objects.create_namespaced_custom_object(*args, b), _widget("w", 1, 8)),
        TIMEOUT_S,
        "the Widget resource to be served",
    )
    objects.patch_namespaced_custom_object_status(
        *args, "w", {"status": {"replicas": 1, "selector": "app=w"}}
    )
    objects.patch_namespaced_custom_object_scale(*args, "w", {"spec": {"replicas": 3}})
    widget = objects.get_namespaced_custom_object(*args, "w")
    assert widget["spec"]["replicas"] == 3
    scale = objects.get_namespaced_custom_object_scale(*args, "w")
    assert scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 1, "selector": "app=w"}
    with pytest.raises(ApiException) as rejected:
        objects.patch_namespaced_custom_object_scale(*args, "w", {"spec": {"replicas": 9}})
    assert CEL_MESSAGE in str(rejected.value.body)


def test_pod_on_kwok_node_runs_ready_and_deletes(api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    if not core.list_node(label_selector="type=kwok").items:
        pytest.skip("this cluster has no kwok nodes")
    pod = {
        "metadata": {"name": "fake"},
        "spec": {
            "nodeSelector": kwok_node_selector(),
            "containers": [{"name": "main", "image": "registry.invalid/not-pulled:1"}],
        },
    }
    core.create_namespaced_pod(namespace, pod)

    def running_ready() -> Any:
        current = core.read_namespaced_pod("fake", namespace)
        ok = current.status.phase == "Running" and _condition(current, "Ready") == "True"
        return current if ok else None

    current = wait_for(running_ready, TIMEOUT_S, "pod on a kwok node Running and Ready")
    assert current.spec.node_name in KWOK_NODES
    core.delete_namespaced_pod("fake", namespace)
    wait_for(
        lambda: _gone(lambda: core.read_namespaced_pod("fake", namespace)), TIMEOUT_S, "kwok pod removed"
    )


def _process_pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    """A pod pinned to the process node whose only container runs ``python -c script``."""
    container: dict[str, Any] = {
        "name": "main",
        "image": "none",
        "command": [sys.executable, "-c", script],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
    }
    container.update(spec.pop("container", {}))
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": process_node_selector(),
            "tolerations": process_node_tolerations(),
            "containers": [container],
            **spec,
        },
    }


def _container_status(core: client.CoreV1Api, name: str, namespace: str) -> Any:
    statuses = core.read_namespaced_pod(name, namespace).status.container_statuses or []
    return statuses[0] if statuses else None


def test_process_node_runs_real_process_and_reports_exit_and_restarts(
    api_client: client.ApiClient, namespace: str, process_node: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    runs = tmp_path / "runs.txt"
    script = f"import os\nwith open({str(runs)!r}, 'a') as f: f.write(os.environ['POD_NAME'] + '\\n')\nraise SystemExit(3)"
    core.create_namespaced_pod(namespace, _process_pod("crasher", script, restartPolicy="Always"))

    def restarted() -> Any:
        status = _container_status(core, "crasher", namespace)
        return status if status and status.restart_count >= 1 and status.last_state.terminated else None

    status = wait_for(restarted, TIMEOUT_S, "the crashing container to be restarted")
    assert status.last_state.terminated.exit_code == 3
    # restartCount counts starts; the restarted process may not have written its line yet
    wait_for(lambda: runs.read_text().splitlines()[:2] == ["crasher", "crasher"], TIMEOUT_S, "two real runs")
    assert core.read_namespaced_pod("crasher", namespace).spec.node_name == process_node


def test_process_node_pod_succeeds_with_exit_code_zero(
    api_client: client.ApiClient, namespace: str, process_node: str
) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, _process_pod("once", "print('done')", restartPolicy="Never"))
    wait_for(
        lambda: core.read_namespaced_pod("once", namespace).status.phase == "Succeeded",
        TIMEOUT_S,
        "pod with restartPolicy Never to succeed",
    )
    status = _container_status(core, "once", namespace)
    assert status.state.terminated.exit_code == 0
    assert status.restart_count == 0
    assert core.read_namespaced_pod_log("once", namespace) == "done\n"  # kubectl logs, via the node


def test_process_node_readiness_follows_exec_probe(
    api_client: client.ApiClient, namespace: str, process_node: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    marker = tmp_path / "ready"
    probe = {"exec": {"command": ["test", "-f", str(marker)]}, "periodSeconds": 1}
    pod = _process_pod(
        "probed", "import time\nwhile True: time.sleep(1)", container={"readinessProbe": probe}
    )
    core.create_namespaced_pod(namespace, pod)
    wait_for(
        lambda: core.read_namespaced_pod("probed", namespace).status.phase == "Running",
        TIMEOUT_S,
        "probed pod Running",
    )
    time.sleep(2)  # several probe periods: the pod must stay unready while the probe fails
    assert _condition(core.read_namespaced_pod("probed", namespace), "Ready") == "False"
    marker.touch()
    wait_for(
        lambda: _condition(core.read_namespaced_pod("probed", namespace), "Ready") == "True",
        TIMEOUT_S,
        "pod Ready once its exec probe passes",
    )


def test_process_node_restarts_container_failing_liveness_probe(
    api_client: client.ApiClient, namespace: str, process_node: str
) -> None:
    core = client.CoreV1Api(api_client)
    probe = {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 2}
    pod = _process_pod(
        "unhealthy", "import time\nwhile True: time.sleep(1)", container={"livenessProbe": probe}
    )
    core.create_namespaced_pod(namespace, pod)

    def restarted() -> Any:
        status = _container_status(core, "unhealthy", namespace)
        return status if status and status.restart_count >= 1 and status.last_state.terminated else None

    status = wait_for(restarted, TIMEOUT_S, "the container failing its liveness probe to be restarted")
    assert status.last_state.terminated.exit_code == 137  # 128 + SIGKILL, as a kubelet reports it


def test_process_node_http_probe_and_sigterm_on_delete(
    api_client: client.ApiClient, namespace: str, process_node: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    port = processes.free_port()
    log = tmp_path / "signals.txt"
    script = (
        "import http.server, os, signal, sys, threading\n"
        f"def on_term(*_):\n    open({str(log)!r}, 'w').write('SIGTERM')\n    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        f"server = http.server.HTTPServer((os.environ['POD_IP'], {port}), http.server.SimpleHTTPRequestHandler)\n"
        "threading.Thread(target=server.serve_forever, daemon=True).start()\n"
        "signal.pause()\n"
    )
    probe = {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1}
    container = {"ports": [{"name": "http", "containerPort": port}], "readinessProbe": probe}
    core.create_namespaced_pod(namespace, _process_pod("server", script, container=container))
    wait_for(
        lambda: _condition(core.read_namespaced_pod("server", namespace), "Ready") == "True",
        TIMEOUT_S,
        "HTTP-probed pod Ready",
    )
    core.delete_namespaced_pod("server", namespace, grace_period_seconds=20)
    wait_for(lambda: _gone(lambda: core.read_namespaced_pod("server", namespace)), TIMEOUT_S, "pod removed")
    assert log.read_text() == "SIGTERM"


def test_process_node_pods_get_own_ip_and_emptydir(
    api_client: client.ApiClient, namespace: str, process_node: str, tmp_path: Path
) -> None:
    """Two pods serve on the same port (each on its pod IP) and write to the same mountPath without
    sharing a directory: what several executors on the process node need."""
    core = client.CoreV1Api(api_client)
    port = processes.free_port()
    script = (
        "import http.server, os, pathlib\n"
        "state = pathlib.Path(os.environ['STATE_DIR'])\n"
        "(state / 'owner').write_text(os.environ['POD_NAME'])\n"
        f"pathlib.Path({str(tmp_path)!r}, os.environ['POD_NAME']).write_text(str(state))\n"
        f"http.server.HTTPServer((os.environ['POD_IP'], {port}), http.server.SimpleHTTPRequestHandler).serve_forever()\n"
    )
    container = {
        "volumeMounts": [{"name": "state", "mountPath": "/var/lib/e2e-state"}],
        "readinessProbe": {"httpGet": {"path": "/", "port": port}, "periodSeconds": 1},
    }
    for name in ("left", "right"):
        pod = _process_pod(name, script, container=container, volumes=[{"name": "state", "emptyDir": {}}])
        pod["spec"]["containers"][0]["env"].append({"name": "STATE_DIR", "value": "/var/lib/e2e-state"})
        core.create_namespaced_pod(namespace, pod)
    for name in ("left", "right"):
        wait_for(
            lambda n=name: _condition(core.read_namespaced_pod(n, namespace), "Ready") == "True",
            TIMEOUT_S,
            f"pod {name} Ready on its own IP",
        )
    ips = {core.read_namespaced_pod(n, namespace).status.pod_ip for n in ("left", "right")}
    assert len(ips) == 2
    dirs = {name: Path((tmp_path / name).read_text()) for name in ("left", "right")}
    assert dirs["left"] != dirs["right"]
    for name, directory in dirs.items():
        assert (directory / "owner").read_text() == name


def test_process_node_kills_after_grace_period(
    api_client: client.ApiClient, namespace: str, process_node: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    pid_file = tmp_path / "pid"
    script = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "while True: time.sleep(1)\n"
    )
    core.create_namespaced_pod(namespace, _process_pod("stubborn", script))
    wait_for(pid_file.exists, TIMEOUT_S, "the stubborn process to start")
    pid = int(wait_for(lambda: pid_file.read_text(), TIMEOUT_S, "the pid file to be written"))
    core.delete_namespaced_pod("stubborn", namespace, grace_period_seconds=1)
    wait_for(lambda: _gone(lambda: core.read_namespaced_pod("stubborn", namespace)), TIMEOUT_S, "pod removed")
    assert not Path(f"/proc/{pid}").exists(), "the process ignoring SIGTERM must be killed"


def test_process_node_puts_configured_dirs_first_on_path(
    api_client: client.ApiClient, namespace: str, process_node: str, local_cluster: Any, tmp_path: Path
) -> None:
    if local_cluster is None:
        pytest.skip("the PATH setting belongs to the local process node")
    core = client.CoreV1Api(api_client)
    found = tmp_path / "which"
    pod = _process_pod("which", "", restartPolicy="Never")
    pod["spec"]["containers"][0]["command"] = ["sh", "-c", f"command -v streamapp > {found}"]
    core.create_namespaced_pod(namespace, pod)
    wait_for(
        lambda: core.read_namespaced_pod("which", namespace).status.phase == "Succeeded",
        TIMEOUT_S,
        "the PATH lookup pod to succeed",
    )
    assert Path(found.read_text().strip()).parent == Path(local_cluster.process_path[0])


def test_process_node_pod_acts_as_its_service_account(
    api_client: client.ApiClient, namespace: str, process_node: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    identity = tmp_path / "identity"
    script = (
        "from kubernetes import client, config\n"
        "config.load_kube_config()\n"
        "review = client.AuthenticationV1Api().create_self_subject_review(client.V1SelfSubjectReview())\n"
        f"open({str(identity)!r}, 'w').write(review.status.user_info.username)\n"
    )
    core.create_namespaced_pod(namespace, _process_pod("whoami", script, restartPolicy="Never"))
    phase = wait_for(
        lambda: (
            core.read_namespaced_pod("whoami", namespace).status.phase in ("Succeeded", "Failed")
            and core.read_namespaced_pod("whoami", namespace).status.phase
        ),
        TIMEOUT_S,
        "the whoami pod to finish",
    )
    assert phase == "Succeeded"
    assert identity.read_text() == f"system:serviceaccount:{namespace}:default"


def test_garbage_collector_deletes_owned_object(api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    parent = core.create_namespaced_config_map(namespace, {"metadata": {"name": "parent"}})
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "parent", "uid": parent.metadata.uid}
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "child", "ownerReferences": [owner]}})
    core.delete_namespaced_config_map("parent", namespace, propagation_policy="Background")
    wait_for(
        lambda: _gone(lambda: core.read_namespaced_config_map("child", namespace)),
        TIMEOUT_S,
        "the garbage collector to delete the owned ConfigMap",
    )


def _client_for_token(api_client: client.ApiClient, token: str) -> client.ApiClient:
    """A client with the same server and CA but authenticating as a ServiceAccount token."""
    configuration = client.Configuration()
    configuration.host = api_client.configuration.host
    configuration.ssl_ca_cert = api_client.configuration.ssl_ca_cert
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(configuration)


def test_service_account_without_role_binding_is_denied(api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token_request = {"spec": {"audiences": [], "expirationSeconds": 600}}
    token = core.create_namespaced_service_account_token("nobody", namespace, token_request).status.token
    with _client_for_token(api_client, token) as as_sa:
        sa_core = client.CoreV1Api(as_sa)
        with pytest.raises(ApiException) as denied:
            sa_core.list_namespaced_pod(namespace)
        assert denied.value.status == 403, "authenticated but unauthorized must be 403, not 401"
        role = {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        }
        rbac = client.RbacAuthorizationV1Api(api_client)
        rbac.create_namespaced_role(namespace, role)
        binding = {
            "metadata": {"name": "pod-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": namespace}],
        }
        rbac.create_namespaced_role_binding(namespace, binding)
        wait_for(lambda: _allowed(sa_core, namespace), TIMEOUT_S, "the RoleBinding to grant list pods")


def _allowed(core: client.CoreV1Api, namespace: str) -> bool:
    try:
        core.list_namespaced_pod(namespace)
    except ApiException as error:
        if error.status == 403:
            return False
        raise
    return True
