"""Build ``streamapp:<version>`` from ``images/Containerfile`` on the cached base, only when needed.

The image carries a content-hash label (base key + Containerfile + requirements + sources); when the
tagged image already has the hash of the current tree, nothing runs. Otherwise ``podman build`` runs
with its layer cache, so a change to the sources alone rebuilds only the last layer.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from imagebuild import base, context, podman, settings
from imagebuild.progress import run_logged, say


@dataclass(frozen=True)
class BuildResult:
    """What ``ensure_image`` did, with the timings images/README.md records."""

    reference: str
    content_hash: str
    built: bool
    base_seconds: float
    image_seconds: float
    total_seconds: float


def content_hash(base_key: str, entries: dict[str, bytes]) -> str:
    """The label value that says which inputs an image was built from."""
    return context.digest(entries, f"base={base_key}")


def current_hash() -> str:
    """Hash of the tree as it is now (cheap: reads the sources, runs nothing)."""
    return content_hash(base.key(), context.files())


def is_current(reference: str | None = None) -> bool:
    """Whether the local image was built from exactly the current tree."""
    found = podman.image_label(reference or settings.image_tag(), settings.HASH_LABEL)
    return found == current_hash()


def _podman_build(base_ref: str, base_key: str, entries: dict[str, bytes], wanted: str) -> float:
    tag = settings.image_tag()
    with tempfile.TemporaryDirectory(prefix="streamapp-image-") as scratch:
        workdir = Path(scratch)
        context_dir = workdir / "context"
        context.write(entries, context_dir)
        secrets = context.pip_secrets(workdir)
        requirements = context.requirements_digest()
        sources = context.digest({k: v for k, v in entries.items() if k != context.CONTAINERFILE})
        command = podman.command(
            "build",
            "--pull=never",
            "--layers",
            *podman.ulimit_args(),
            *(f"--secret=id={name},src={path}" for name, path in secrets.items()),
            f"--build-arg=BASE_IMAGE={base_ref}",
            f"--build-arg=REQUIREMENTS_HASH={requirements}",
            f"--build-arg=SOURCE_HASH={sources}",
            f"--label={settings.HASH_LABEL}={wanted}",
            f"--label={settings.BASE_LABEL}={base_key}",
            f"--tag={tag}",
            f"--file={context_dir / context.CONTAINERFILE}",
            str(context_dir),
        )
        log = settings.cache_root() / "logs" / f"image-{wanted}.log"
        return run_logged("podman build", command, log)


def _drop_previous(previous_id: str | None, reference: str) -> None:
    """Remove the image the tag pointed to before (its layers are shared, its tag moved on)."""
    info = podman.image_info(reference)
    if previous_id and info is not None and info.get("Id") != previous_id:
        podman.run(["image", "rm", previous_id], check=False)


def ensure_image(force: bool = False, refresh_base: bool = False) -> BuildResult:
    """Build the base (if missing) and the image (if its inputs changed); return what happened."""
    started = time.monotonic()
    reference = settings.image_tag()
    with base.build_lock():
        entries = context.files()
        base_key = base.key()
        wanted = content_hash(base_key, entries)
        previous = podman.image_info(reference)
        labels = (previous or {}).get("Labels") or {}
        assert isinstance(labels, dict)
        if not (force or refresh_base) and labels.get(settings.HASH_LABEL) == wanted:
            say(f"{reference} is current (content {wanted})")
            return BuildResult(reference, wanted, False, 0.0, 0.0, time.monotonic() - started)
        base_ref, base_seconds = base.ensure_base(refresh=refresh_base)
        say(f"building {reference} on {base_ref} (content {wanted})")
        image_seconds = _podman_build(base_ref, base_key, entries, wanted)
        previous_id = str(previous["Id"]) if previous else None
        _drop_previous(previous_id, reference)
    size_mb = podman.image_size(reference) / 1e6
    say(f"{reference}: {size_mb:.0f} MB")
    return BuildResult(reference, wanted, True, base_seconds, image_seconds, time.monotonic() - started)
