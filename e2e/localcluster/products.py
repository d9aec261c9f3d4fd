"""What is built: each upstream Go module, its commands, and the tags/ldflags upstream builds them with."""

from __future__ import annotations

from dataclasses import dataclass

from localcluster import versions

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


@dataclass(frozen=True)
class Product:
    """One upstream Go module and the commands built from it.

    ``ldflag_templates`` may use ``{release_time}``: the module's publication time from the proxy, a
    fixed value that keeps builds reproducible where upstream stamps the build date.
    """

    name: str
    module: str
    version: str
    commands: dict[str, str]
    tags: str = ""
    ldflag_templates: tuple[str, ...] = ()
    replace_staging: bool = False

    def ldflags(self, release_time: str) -> list[str]:
        return [template.format(release_time=release_time) for template in self.ldflag_templates]


def _kubernetes_version_ldflags() -> tuple[str, ...]:
    """``hack/lib/version.sh``'s -X flags; without them ``/version`` reports ``v0.0.0-master``.

    The module proxy does not carry the git commit, so gitTreeState is ``archive`` (what upstream uses
    for source tarballs) and gitCommit stays empty.
    """
    major, minor = versions.KUBERNETES.removeprefix("v").split(".")[:2]
    values = {
        "gitVersion": versions.KUBERNETES,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "archive",
        "buildDate": "{release_time}",
    }
    return tuple(
        f"-X {package}.{key}={value}"
        for package in ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")
        for key, value in values.items()
    )


ETCD = Product(
    "etcd",
    "go.etcd.io/etcd/server/v3",
    versions.ETCD,
    {"etcd": "go.etcd.io/etcd/server/v3"},  # the module root is etcd's main package
)
KWOK = Product(
    "kwok",
    "sigs.k8s.io/kwok",
    versions.KWOK,
    {"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
    ldflag_templates=(f"-X sigs.k8s.io/kwok/pkg/consts.Version={versions.KWOK}",),
)
KUBERNETES = Product(
    "kubernetes",
    "k8s.io/kubernetes",
    versions.KUBERNETES,
    {name: f"k8s.io/kubernetes/cmd/{name}" for name in KUBERNETES_COMMANDS},
    tags="selinux,notest,grpcnotrace",  # as hack/lib/golang.sh builds release binaries
    ldflag_templates=_kubernetes_version_ldflags(),
    replace_staging=True,
)
PRODUCTS = (ETCD, KWOK, KUBERNETES)

# The real node (e2e/realnode), built only when a real node is asked for: the kubelet and kube-proxy of
# the same Kubernetes build, containerd with its runc shim and `ctr` (images are imported with it), and
# the CNI plugins a bridge network needs.
KUBERNETES_NODE = Product(
    "kubernetes-node",
    "k8s.io/kubernetes",
    versions.KUBERNETES,
    {name: f"k8s.io/kubernetes/cmd/{name}" for name in ("kubelet", "kube-proxy")},
    tags=KUBERNETES.tags,
    ldflag_templates=KUBERNETES.ldflag_templates,
    replace_staging=True,
)
CONTAINERD = Product(
    "containerd",
    "github.com/containerd/containerd/v2",
    versions.CONTAINERD,
    {
        name: f"github.com/containerd/containerd/v2/cmd/{name}"
        for name in ("containerd", "containerd-shim-runc-v2", "ctr")
    },
    # the snapshotters that need cgo or kernel modules this host lacks; overlayfs and native remain
    tags="no_btrfs,no_devmapper,no_zfs",
    ldflag_templates=(f"-X github.com/containerd/containerd/v2/version.Version={versions.CONTAINERD}",),
)
CNI_PLUGINS = Product(
    "cni-plugins",
    "github.com/containernetworking/plugins",
    versions.CNI_PLUGINS,
    {
        "bridge": "github.com/containernetworking/plugins/plugins/main/bridge",
        "loopback": "github.com/containernetworking/plugins/plugins/main/loopback",
        "host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
        "portmap": "github.com/containernetworking/plugins/plugins/meta/portmap",
    },
    ldflag_templates=(
        "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion="
        f"{versions.CNI_PLUGINS}",
    ),
)
NODE_PRODUCTS = (KUBERNETES_NODE, CONTAINERD, CNI_PLUGINS)
