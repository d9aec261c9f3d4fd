"""``python -m helmtool build [--force]`` (run with e2e/ on the path): build the pinned helm once."""

from __future__ import annotations

import argparse
import sys

from helmtool import build


def main(argv: list[str] | None = None) -> int:
    """Build helm unless cached and print where it is."""
    root = argparse.ArgumentParser(prog="python -m helmtool", description=__doc__)
    sub = root.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build", help=f"build helm {build.HELM_VERSION} from Go modules (cached)")
    build_cmd.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = root.parse_args(argv)
    seconds = build.ensure_built(force=args.force)
    where = build.helm_path()
    print(f"helm cached in {where}" if seconds is None else f"built {where} in {seconds:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
