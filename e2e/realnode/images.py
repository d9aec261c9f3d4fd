"""Images on the real node without a registry: the pause image built here, ours exported from podman,
both imported into containerd's ``k8s.io`` namespace (where the kubelet's CRI looks for them).

The pause image is a one-file OCI archive written by hand (its binary compiled from ``pause.c`` with
gcc, statically): nothing else is in it, and writing the few JSON documents of an OCI layout is simpler
and more reproducible than a container build for it.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

PAUSE_IMAGE = "localhost/streamapp-pause:1"
PAUSE_SOURCE = Path(__file__).with_name("pause.c")
CRI_NAMESPACE = "k8s.io"
# The pause process runs as nobody, as upstream's does.
PAUSE_USER = "65535:65535"


def build_pause_binary(target: Path) -> Path:
    """Compile ``pause.c`` statically (the image has no libc)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(target), str(PAUSE_SOURCE)],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


def _blob(blobs: dict[str, bytes], data: bytes) -> tuple[str, int]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return digest, len(data)


def _layer(binary: Path) -> bytes:
    """An uncompressed layer holding ``/pause`` with fixed ownership and time (reproducible)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as layer:
        info = tarfile.TarInfo("pause")
        info.size, info.mode, info.mtime = binary.stat().st_size, 0o755, 0
        with binary.open("rb") as data:
            layer.addfile(info, data)
    return buffer.getvalue()


def pause_archive(binary: Path, target: Path, name: str = PAUSE_IMAGE) -> Path:
    """Write an OCI image layout tarball of the pause image, named ``name`` for containerd's import."""
    blobs: dict[str, bytes] = {}
    layer = _layer(binary)
    layer_digest, layer_size = _blob(blobs, layer)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": PAUSE_USER},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    config_digest, config_size = _blob(blobs, json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_size,
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": layer_digest,
                "size": layer_size,
            }
        ],
    }
    manifest_digest, manifest_size = _blob(blobs, json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": manifest_size,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name},
            }
        ],
    }
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index).encode(),
    }
    files |= {f"blobs/sha256/{digest.removeprefix('sha256:')}": data for digest, data in blobs.items()}
    with tarfile.open(target, "w") as archive:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mtime = len(data), 0
            archive.addfile(info, io.BytesIO(data))
    return target


def import_archive(ctr: Path, address: Path, archive: Path) -> None:
    """``ctr images import`` into the CRI namespace, unpacked for the overlayfs snapshotter the CRI uses."""
    subprocess.run(
        [
            str(ctr),
            f"--address={address}",
            f"--namespace={CRI_NAMESPACE}",
            "images",
            "import",
            "--snapshotter=overlayfs",
            str(archive),
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def import_pause(ctr: Path, address: Path, work: Path) -> None:
    """Build and import the pause image (a second, cheap step on every node start)."""
    binary = build_pause_binary(work / "pause")
    import_archive(ctr, address, pause_archive(binary, work / "pause.tar"))


def normalized(reference: str) -> str:
    """The name the kubelet asks containerd for when a pod says ``reference`` (Docker's normalization:
    ``streamapp:0.1.0`` is ``docker.io/library/streamapp:0.1.0``; ``localhost/x`` stays as it is)."""
    first, _, rest = reference.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return reference
    return f"docker.io/{reference}" if rest else f"docker.io/library/{reference}"


def import_from_podman(
    podman_command: list[str], reference: str, ctr: Path, address: Path, also_as: tuple[str, ...] = ()
) -> None:
    """Export a local podman image (``docker-archive`` keeps its name), import it into the node, and
    tag it with the normalized form of each name in ``also_as`` (what pod specs call it)."""
    with tempfile.TemporaryDirectory(prefix="streamapp-node-image-") as scratch:
        archive = Path(scratch) / "image.tar"
        subprocess.run(
            [*podman_command, "save", "--format=docker-archive", "-o", str(archive), reference],
            check=True,
            capture_output=True,
            text=True,
        )
        import_archive(ctr, address, archive)
    source = normalized(reference)
    for name in {normalized(alias) for alias in also_as} - {source}:
        subprocess.run(
            [
                str(ctr),
                f"--address={address}",
                f"--namespace={CRI_NAMESPACE}",
                "images",
                "tag",
                "--force",
                source,
                name,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
