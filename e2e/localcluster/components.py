"""Command lines of the control-plane components, as pure functions of paths and ports.

Only 127.0.0.1 is bound, except the API server's address when the cluster has a real node
(:mod:`realnode.network`: a bridge address, never an external interface). Flags follow what kubeadm/envtest use, trimmed to a single-node control
plane: no leader election (one instance of each), the kubernetes Service's endpoint reconciler off
when the API server is on loopback (a loopback address is not a valid endpoint), and etcd without fsync (a throw-away test cluster).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node=fake"
FRONT_PROXY_CLIENT = "front-proxy-client"
# The disruption controller maps a custom owner (StreamApp) to its /scale through a discovery cache
# that is refreshed only every 30 s; a PDB evaluated in the seconds after the CRD appeared fails
# ("no matches for kind") and is parked at disruptionsAllowed 0 without a retry until the next event
# on the PDB or its pods, or an informer resync (12-24 h by default). Resyncing every 20-40 s lets
# such a PDB recover in about a minute; the controllers' no-op work on a resync is negligible here.
CONTROLLER_RESYNC = "20s"
NODE_MONITOR_GRACE = "180s"
KWOK_STAGE_FILES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)


@dataclass(frozen=True)
class Ports:
    """Loopback ports chosen free at start-up."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    process_node_logs: int
    provisioner_metrics: int


@dataclass(frozen=True)
class Pki:
    """Certificate and key files the components read."""

    ca_cert: Path
    ca_key: Path
    apiserver_cert: Path
    apiserver_key: Path
    sa_public: Path
    sa_private: Path
    kubelet_client_cert: Path
    kubelet_client_key: Path
    # The aggregation layer: the CA of the identity the API server proxies to extension API servers
    # with (KEDA's metrics adapter), and that identity's pair.
    front_proxy_ca_cert: Path
    proxy_client_cert: Path
    proxy_client_key: Path


def etcd(bin_dir: Path, data_dir: Path, ports: Ports) -> list[str]:
    """Single-member etcd on plain HTTP loopback; apiserver is its only client."""
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(bin_dir / "etcd"),
        "--name=streamapp",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=streamapp={peer}",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def kube_apiserver(bin_dir: Path, pki: Pki, ports: Ports, address: str = LOOPBACK) -> list[str]:
    """kube-apiserver with Node+RBAC authorization and the default admission chain plus NodeRestriction
    and OwnerReferencesPermissionEnforcement (as OpenShift runs): a child whose ownerReference sets
    `blockOwnerDeletion` is created only by someone who may update its owner's finalizers.

    ``address`` is loopback unless a real node's pods must reach it (then the node's bridge address,
    and the ``kubernetes`` Service gets that endpoint from the lease reconciler)."""
    reconciler = "none" if address == LOOPBACK else "lease"
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        f"--bind-address={address}",
        f"--advertise-address={address}",
        f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={pki.apiserver_cert}",
        f"--tls-private-key-file={pki.apiserver_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki.sa_public}",
        f"--service-account-signing-key-file={pki.sa_private}",
        f"--kubelet-client-certificate={pki.kubelet_client_cert}",
        f"--kubelet-client-key={pki.kubelet_client_key}",
        f"--kubelet-certificate-authority={pki.ca_cert}",
        "--kubelet-preferred-address-types=InternalIP",
        f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki.proxy_client_cert}",
        f"--proxy-client-key-file={pki.proxy_client_key}",
        # An APIService's Service is reached at its endpoints' addresses: nothing here routes ClusterIPs.
        "--enable-aggregator-routing=true",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--endpoint-reconciler-type={reconciler}",
        "--allow-privileged=true",
        "--profiling=false",
        "--v=1",
    ]


def kube_controller_manager(bin_dir: Path, kubeconfig: Path, pki: Pki, ports: Ports) -> list[str]:
    """All default controllers (GC, namespace, service accounts and their tokens, node lifecycle, ...)."""
    return [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.controller_manager}",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.sa_private}",
        f"--root-ca-file={pki.ca_cert}",
        f"--cluster-signing-cert-file={pki.ca_cert}",
        f"--cluster-signing-key-file={pki.ca_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--min-resync-period={CONTROLLER_RESYNC}",
        # Nodes are marked NotReady only after 3 minutes without a heartbeat, not 50 s. Tests stop and
        # restart the API server; its RBAC answers "forbidden" until its caches fill, and the
        # controller-manager's watches then back off (up to a minute per try, jittered), so its view of
        # the node leases can lag 50 s although they were renewed. A node marked NotReady marks its pods
        # NotReady, and kwok, unlike a kubelet, never marks them Ready again: the members stay lost.
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE}",
        "--profiling=false",
        "--v=1",
    ]


def kube_scheduler(bin_dir: Path, kubeconfig: Path, ports: Ports) -> list[str]:
    """The default scheduler; kwok does not schedule, so pods without nodeName need it."""
    return [
        str(bin_dir / "kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.scheduler}",
        "--leader-elect=false",
        "--profiling=false",
        "--v=1",
    ]


def kwok(bin_dir: Path, stages_dir: Path, kubeconfig: Path, ports: Ports) -> list[str]:
    """kwok managing only nodes annotated ``kwok.x-k8s.io/node=fake`` (never the process node)."""
    return [
        str(bin_dir / "kwok"),
        f"--kubeconfig={kubeconfig}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}",
        "--node-lease-duration-seconds=40",
        "--cidr=10.244.0.0/16",
        "--node-ip=10.244.255.254",
        f"--server-address=127.0.0.1:{ports.kwok}",
        *(f"--config={stages_dir / stage}" for stage in KWOK_STAGE_FILES),
    ]


def provisioner(binary: Path, kubeconfig: Path, volumes: Path, metrics_port: int) -> list[str]:
    """The hostpath provisioner (see :mod:`localcluster.provisioner`); its /metrics tells it runs."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--root={volumes}",
        f"--metrics-port={metrics_port}",
    ]
