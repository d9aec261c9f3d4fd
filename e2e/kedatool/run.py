"""KEDA's operator and metrics adapter as processes beside the local cluster, serving the external
metrics API to the controller-manager's HPA through the API server's aggregation layer.

What KEDA's manifests do with Deployments and a Service, done for processes:

- its CRDs (from the build) and its namespace;
- one CA of its own and one certificate for both ends of the operator↔adapter gRPC link (mutual TLS,
  as KEDA's cert rotation issues it) and for the adapter's HTTPS endpoint;
- the `v1beta1.external.metrics.k8s.io` APIService, pointing at a Service without a selector whose
  Endpoints give this host's address: the API server runs with `--enable-aggregator-routing` (nothing
  routes ClusterIPs here), and an endpoint may not be a loopback address.

The APIService is deleted before the processes stop: an unavailable aggregated API fails the discovery
that namespace deletion needs, so every later test's namespace would hang in Terminating.
"""

from __future__ import annotations

import base64
import ipaddress
import shutil
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kedatool import build
from kubesetup import wait_established
from localcluster import certs, processes
from localcluster.waiting import wait_for

NAMESPACE = "keda"
ADAPTER_SERVICE = "keda-metrics-apiserver"
API_SERVICE = "v1beta1.external.metrics.k8s.io"
READY_TIMEOUT_S = 120.0
FIELD_MANAGER = "streamapp-e2e"


def host_address() -> str:
    """This host's address on its default route: the API server dials the adapter there.

    A UDP connect sends nothing; it only makes the kernel choose the source address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError as error:
            raise RuntimeError(f"no IPv4 route for the adapter's endpoint address: {error}") from error
        address = str(probe.getsockname()[0])
    if ipaddress.ip_address(address).is_loopback:
        raise RuntimeError("only a loopback address is routable here; an endpoint may not use one")
    return address


def _apply(api: client.ApiClient, body: dict[str, Any]) -> None:
    """Server-side apply: creates ``body``, or brings back to it what a run that died left."""
    dynamic = DynamicClient(api)
    resource = dynamic.resources.get(api_version=body["apiVersion"], kind=body["kind"])
    metadata = body["metadata"]
    dynamic.server_side_apply(
        resource,
        body=body,
        name=metadata["name"],
        namespace=metadata.get("namespace"),
        field_manager=FIELD_MANAGER,
        force_conflicts=True,
    )


def _install_crds(api: client.ApiClient) -> None:
    """KEDA's CRDs from the build, each Established before the operator watches it."""
    for path in sorted((build.directory() / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        _apply(api, crd)
        wait_established(api, crd["metadata"]["name"])


def _certificates(directory: Path, address: str) -> Path:
    """``ca.crt``, ``tls.crt`` and ``tls.key`` as KEDA reads them from its cert dir; returns the dir."""
    ca = certs.CertificateAuthority(directory / "ca", "keda-local-ca")
    pair = ca.issue(
        "keda",
        certs.Identity("keda"),
        server_names=(f"{ADAPTER_SERVICE}.{NAMESPACE}.svc", f"keda-operator.{NAMESPACE}.svc", "localhost"),
        server_ips=("127.0.0.1", address),
        client_too=True,
    )
    cert_dir = directory / "certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ca.pair.cert, cert_dir / "ca.crt")
    shutil.copyfile(pair.cert, cert_dir / "tls.crt")
    shutil.copyfile(pair.key, cert_dir / "tls.key")
    return cert_dir


def _environment(kubeconfig: Path) -> dict[str, str]:
    """What KEDA's Deployments set: the cluster-wide watch, its own namespace, and the kubeconfig a
    controller-runtime client reads outside a pod."""
    return {
        "PATH": "/usr/bin:/bin",
        "KUBECONFIG": str(kubeconfig),
        "WATCH_NAMESPACE": "",
        "POD_NAMESPACE": NAMESPACE,
        "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE,
    }


def _register(api: client.ApiClient, address: str, port: int, ca_cert: Path) -> None:
    """The adapter's Service, its Endpoints at ``address:port``, and the APIService that routes the
    external metrics API to it."""
    _apply(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    meta = {"name": ADAPTER_SERVICE, "namespace": NAMESPACE}
    _apply(
        api,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
        },
    )
    _apply(
        api,
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": meta,
            "subsets": [{"addresses": [{"ip": address}], "ports": [{"name": "https", "port": port}]}],
        },
    )
    _apply(
        api,
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": API_SERVICE},
            "spec": {
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "service": {"name": ADAPTER_SERVICE, "namespace": NAMESPACE, "port": 443},
                "caBundle": base64.b64encode(ca_cert.read_bytes()).decode(),
            },
        },
    )


def _available(api: client.ApiClient) -> bool:
    conditions = client.ApiregistrationV1Api(api).read_api_service(API_SERVICE).status.conditions or []
    return any(c.type == "Available" and c.status == "True" for c in conditions)


def _unregister(api: client.ApiClient) -> None:
    try:
        client.ApiregistrationV1Api(api).delete_api_service(API_SERVICE)
    except ApiException as error:
        if error.status != 404:
            raise


@contextmanager
def running(api: client.ApiClient, kubeconfig: Path, workdir: Path) -> Iterator[None]:
    """KEDA serving external metrics to the cluster until the block ends (built first if needed)."""
    build.ensure_built()
    address = host_address()
    _install_crds(api)
    cert_dir = _certificates(workdir, address)
    env = _environment(kubeconfig)
    grpc, health, adapter_port, adapter_metrics = processes.free_ports(4)
    with ExitStack() as stack:
        operator = processes.spawn(
            "keda-operator",
            [
                str(build.directory() / "operator"),
                f"--cert-dir={cert_dir}",
                "--enable-cert-rotation=false",
                "--enable-webhook-patching=false",
                "--enable-apiservice-patching=false",
                "--metrics-bind-address=0",
                f"--health-probe-bind-address=127.0.0.1:{health}",
                f"--metrics-service-bind-address=127.0.0.1:{grpc}",
                "--zap-log-level=info",
            ],
            workdir / "keda-operator.log",
            env,
        )
        stack.callback(processes.stop, operator)
        processes.wait_until(
            lambda: processes.http_ok(f"http://127.0.0.1:{health}/readyz"),
            READY_TIMEOUT_S,
            "the KEDA operator ready",
            operator,
        )
        adapter = processes.spawn(
            "keda-adapter",
            [
                str(build.directory() / "adapter"),
                f"--secure-port={adapter_port}",
                f"--bind-address={address}",
                f"--cert-dir={cert_dir}",
                f"--tls-cert-file={cert_dir / 'tls.crt'}",
                f"--tls-private-key-file={cert_dir / 'tls.key'}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--lister-kubeconfig={kubeconfig}",
                f"--metrics-service-address=127.0.0.1:{grpc}",
                f"--port={adapter_metrics}",
                "--zap-log-level=info",
            ],
            workdir / "keda-adapter.log",
            env,
        )
        stack.callback(processes.stop, adapter)
        _register(api, address, adapter_port, cert_dir / "ca.crt")
        stack.callback(_unregister, api)
        wait_for(lambda: _available(api), READY_TIMEOUT_S, f"APIService {API_SERVICE} Available")
        yield
