"""The real node's pure parts, without a node: configurations, image names, the pause image's OCI
layout, and what cleanup recognises as the node's mounts and iptables rules."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tomllib
from pathlib import Path

import pytest

from realnode import cleanup, images, kubelet, network, proxy, runtime


def test_the_bridge_network_gives_pods_the_node_as_gateway() -> None:
    bridge = network.conflist()["plugins"][0]
    assert bridge["bridge"] == network.BRIDGE
    assert bridge["ipam"]["ranges"] == [[{"subnet": network.POD_CIDR, "gateway": network.GATEWAY}]]
    assert network.GATEWAY.rsplit(".", 2)[0] == network.POD_CIDR.rsplit(".", 2)[0]


def test_containerd_config_is_toml_with_everything_under_the_node_directory(tmp_path: Path) -> None:
    paths = runtime.RuntimePaths(tmp_path)
    parsed = tomllib.loads(
        runtime.config_toml(paths, tmp_path / "cni-bin", "/usr/sbin/runc", "localhost/p:1")
    )
    assert parsed["version"] == 3
    assert parsed["root"] == str(paths.root) and parsed["grpc"]["address"] == str(paths.socket)
    cri = parsed["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["restrict_oom_score_adj"] is True and cri["netns_mounts_under_state_dir"] is True
    assert cri["cni"] == {"bin_dirs": [str(tmp_path / "cni-bin")], "conf_dir": str(paths.cni_conf)}
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["options"] == {"BinaryName": "/usr/sbin/runc", "SystemdCgroup": False}
    assert parsed["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == "localhost/p:1"


def test_a_path_with_quotes_stays_one_toml_string(tmp_path: Path) -> None:
    odd = tmp_path / 'a "b" \\ c'
    parsed = tomllib.loads(runtime.config_toml(runtime.RuntimePaths(odd), odd, "runc", "p"))
    assert parsed["root"] == str(runtime.RuntimePaths(odd).root)


def test_the_kubelet_runs_on_cgroup_v1_with_no_anonymous_access(tmp_path: Path) -> None:
    config = kubelet.configuration(
        client_ca=tmp_path / "ca.crt",
        serving_cert=tmp_path / "s.crt",
        serving_key=tmp_path / "s.key",
        runtime_socket=tmp_path / "containerd.sock",
        address=network.GATEWAY,
        port=10250,
        healthz_port=10248,
        pod_logs=tmp_path / "logs",
    )
    assert config["failCgroupV1"] is False and config["cgroupDriver"] == "cgroupfs"
    assert config["authentication"]["anonymous"] == {"enabled": False}
    assert config["authorization"] == {"mode": "Webhook"} and config["readOnlyPort"] == 0
    assert config["containerRuntimeEndpoint"] == f"unix://{tmp_path / 'containerd.sock'}"


def test_kube_proxy_leaves_host_sysctls_alone(tmp_path: Path) -> None:
    config = proxy.configuration(
        kubeconfig=tmp_path / "k",
        node_name="n",
        cluster_cidr=network.POD_CIDR,
        healthz_port=1,
        metrics_port=2,
    )
    assert config["conntrack"] == {"maxPerCore": 0} and config["mode"] == "iptables"
    assert config["healthzBindAddress"].startswith("127.0.0.1:")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("streamapp:0.1.0", "docker.io/library/streamapp:0.1.0"),
        ("team/streamapp:1", "docker.io/team/streamapp:1"),
        ("localhost/streamapp:0.1.0", "localhost/streamapp:0.1.0"),
        ("registry.example.com/a/b:2", "registry.example.com/a/b:2"),
        ("registry:5000/b:2", "registry:5000/b:2"),
    ],
)
def test_image_names_are_normalized_as_the_kubelet_asks_for_them(name: str, expected: str) -> None:
    assert images.normalized(name) == expected


def test_the_pause_archive_is_an_oci_layout_whose_digests_hold(tmp_path: Path) -> None:
    binary = tmp_path / "pause-binary"
    binary.write_bytes(b"\x7fELF not really")
    archive = images.pause_archive(binary, tmp_path / "pause.tar", name="localhost/p:1")
    with tarfile.open(archive) as layout:
        files = {m.name: layout.extractfile(m).read() for m in layout.getmembers()}  # type: ignore[union-attr]
    for path, data in files.items():
        if path.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == path.rsplit("/", 1)[1]
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/p:1"
    manifest = json.loads(files[f"blobs/sha256/{entry['digest'].removeprefix('sha256:')}"])
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].removeprefix('sha256:')}"])
    assert config["config"]["Entrypoint"] == ["/pause"]
    (layer,) = manifest["layers"]
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]
    with tarfile.open(
        fileobj=io.BytesIO(files[f"blobs/sha256/{layer['digest'].removeprefix('sha256:')}"])
    ) as fs:
        (member,) = fs.getmembers()
        assert member.name == "pause" and member.mode == 0o755
        assert fs.extractfile(member).read() == binary.read_bytes()  # type: ignore[union-attr]


def test_the_pause_binary_compiles_and_stops_on_sigterm(tmp_path: Path) -> None:
    import signal
    import subprocess

    binary = images.build_pause_binary(tmp_path / "pause")
    process = subprocess.Popen([str(binary)])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=0.3)  # it waits for a signal
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 128 + signal.SIGTERM
    finally:
        process.kill()


MOUNTINFO = """\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
90 22 0:50 / /work/.cluster-node/node/containerd/state/io.containerd.runtime.v2.task/k8s.io/abc/rootfs rw - overlay overlay rw
91 22 0:51 / /work/.cluster-node/node/kubelet/pods/u/volumes/kubernetes.io~projected/kube-api-access rw - tmpfs tmpfs rw
92 22 0:52 / /work/.cluster-node/node/with\\040space rw - tmpfs tmpfs rw
93 22 0:53 / /work/.cluster-node-other/x rw - tmpfs tmpfs rw
"""


def test_cleanup_unmounts_only_below_the_node_directory_deepest_first() -> None:
    found = cleanup.mounts_under(Path("/work/.cluster-node/node"), MOUNTINFO)
    assert found == [
        "/work/.cluster-node/node/kubelet/pods/u/volumes/kubernetes.io~projected/kube-api-access",
        "/work/.cluster-node/node/containerd/state/io.containerd.runtime.v2.task/k8s.io/abc/rootfs",
        "/work/.cluster-node/node/with space",
    ]


def test_cleanup_recognises_the_masquerade_rule_of_our_network_only() -> None:
    ours = '-A POSTROUTING -s 10.90.0.4/32 -m comment --comment "name: \\"streamapp\\" id: \\"f00\\"" -j CNI-abc123'
    podman = (
        '-A POSTROUTING -s 10.88.0.4/32 -m comment --comment "name: \\"podman\\" id: \\"f00\\"" -j CNI-def456'
    )
    match = cleanup.CNI_MASQUERADE_RULE.match(ours)
    assert match is not None and match.group(1) == "CNI-abc123"
    assert cleanup.CNI_MASQUERADE_RULE.match(podman) is None
