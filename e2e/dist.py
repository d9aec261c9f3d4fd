"""`make dist`: what a release publishes, built into one folder (`dist/` by default).

- the chart archive, `helm package` of charts/streamapp-operator (what `helm install` and a chart
  repository take);
- the wheel of the operator and its CLI: the base install is light (the `kubectl streamapp` plugin, the
  renderers, the simulator); what executors run and plots are the `executor` and `plots` extras;
- the image as an OCI archive (`podman save --format oci-archive`), built first when not current, for
  `skopeo copy`, `podman load` or `ctr images import` into any registry or node;
- `SHA256SUMS` of the three.

The README's "Install from the release artifacts" shows how each is used; tests/integration/test_helm.py
installs the chart from the archive this module packages.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from helmtool.build import ensure_built, helm_path
from imagebuild import build, podman, settings

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "streamapp-operator"
SUMS = "SHA256SUMS"


def package_chart(out: Path) -> Path:
    """The chart archive (`streamapp-operator-<version>.tgz`) in `out`."""
    ensure_built()
    out.mkdir(parents=True, exist_ok=True)
    _run([str(helm_path()), "package", str(CHART), "--destination", str(out)])
    return out / f"streamapp-operator-{settings.version()}.tgz"


def wheel(out: Path) -> Path:
    """The wheel of the package (no dependencies bundled), in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(REPO)])
    return out / f"streamapp_operator-{settings.version()}-py3-none-any.whl"


def image_archive(out: Path) -> Path:
    """The image as an OCI archive (`streamapp-<version>.oci.tar`), built first when not current."""
    reference = build.ensure_image().reference
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"streamapp-{settings.version()}.oci.tar"
    archive.unlink(missing_ok=True)  # podman save refuses to overwrite
    podman.run(["save", "--format", "oci-archive", "-o", str(archive), reference])
    return archive


def checksums(paths: list[Path], out: Path) -> Path:
    """`SHA256SUMS` in `sha256sum`'s format, so `sha256sum -c SHA256SUMS` checks a download."""
    lines = []
    for path in paths:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        lines.append(f"{digest.hexdigest()}  {path.name}\n")
    target = out / SUMS
    target.write_text("".join(lines))
    return target


def _size(count: int) -> str:
    return f"{count / 1e6:,.1f} MB" if count >= 1e6 else f"{count / 1e3:,.0f} kB"


def _run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed (exit {result.returncode}):\n{result.stderr}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dist.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="where the artifacts go (dist/)")
    parser.add_argument("--no-image", action="store_true", help="leave the image archive out")
    args = parser.parse_args(argv)
    steps: list[tuple[str, Callable[[Path], Path]]] = [("chart", package_chart), ("wheel", wheel)]
    if not args.no_image:
        steps.append(("image (built first when not current; ~750 MB)", image_archive))
    made = []
    for label, step in steps:
        print(f"dist: {label} …", flush=True)
        started = time.monotonic()
        path = step(args.out)
        if not path.is_file():
            raise SystemExit(f"dist: {label} did not leave {path}")
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        print(f"dist: {shown} ({_size(path.stat().st_size)}, {time.monotonic() - started:.0f} s)", flush=True)
        made.append(path)
    print(f"dist: {checksums(made, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
