"""Command line of the container image: ``build``, ``smoke``, ``info``.

Thin on purpose: everything lives in the ``imagebuild`` package so the image tests use the same code.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

from imagebuild import base, build, podman, settings, smoke


def cmd_build(args: argparse.Namespace) -> int:
    """Build the image unless the tagged one was built from exactly this tree."""
    result = build.ensure_image(force=args.force, refresh_base=args.refresh_base)
    if result.built:
        print(
            f"built {result.reference} in {result.total_seconds:.0f}s "
            f"(base {result.base_seconds:.0f}s, image {result.image_seconds:.0f}s)"
        )
    else:
        print(f"{result.reference} is up to date ({result.total_seconds:.1f}s)")
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    """Run the image like a pod would: --version, then a read-only, non-root executor run."""
    build.ensure_image()
    print(smoke.version_output())
    with tempfile.TemporaryDirectory(prefix="streamapp-smoke-") as scratch:
        data = Path(scratch)
        smoke.generate_input(data)
        missing = smoke.uncommitted(data, smoke.run_dataplane(data))
    if missing:
        print(f"the executor in the image left records uncommitted (partition: records): {missing}")
        return 1
    print("the executor in the image (uid 65532, read-only root) committed every input record")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    """Where things are and whether the image is current; exit 1 when it needs a build."""
    reference = settings.image_tag()
    print(f"image:       {reference}")
    imported = podman.image_exists(base.image_reference())
    print(
        f"base:        {base.image_reference()} (imported: {imported}; tarball {base.tarball()}: {base.tarball().is_file()})"
    )
    current = podman.image_exists(reference) and build.is_current(reference)
    if podman.image_exists(reference):
        print(f"size:        {podman.image_size(reference) / 1e6:.0f} MB")
    print(f"content:     {build.current_hash()} ({'current' if current else 'needs a build'})")
    return 0 if current else 1


def parser() -> argparse.ArgumentParser:
    """Sub-commands: build (``make image``), smoke, info."""
    root = argparse.ArgumentParser(prog="image.py", description=__doc__)
    sub = root.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build", help="build the image (cached base; no-op when current)")
    build_cmd.add_argument("--force", action="store_true", help="run podman build even when current")
    build_cmd.add_argument(
        "--refresh-base", action="store_true", help="rebuild the mmdebstrap base too (picks up updates)"
    )
    build_cmd.set_defaults(func=cmd_build)
    sub.add_parser("smoke", help="build if needed, then run the image as a pod would").set_defaults(
        func=cmd_smoke
    )
    sub.add_parser("info", help="show the image, its base cache and whether it is current").set_defaults(
        func=cmd_info
    )
    return root


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``python e2e/image.py``."""
    args = parser().parse_args(argv)
    # SIGTERM unwinds like Ctrl-C: the running step is stopped and its partial output removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
