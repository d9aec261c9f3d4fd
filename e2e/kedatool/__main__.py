"""``python -m kedatool build [--force]`` (run with e2e/ on the path): build the pinned KEDA once."""

from __future__ import annotations

import argparse
import sys

from kedatool import build


def main(argv: list[str] | None = None) -> int:
    """Build KEDA's operator and adapter unless cached and print where they are."""
    root = argparse.ArgumentParser(prog="python -m kedatool", description=__doc__)
    sub = root.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build", help=f"build KEDA {build.VERSION} from Go modules (cached)")
    build_cmd.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = root.parse_args(argv)
    seconds = build.ensure_built(force=args.force)
    where = build.directory()
    print(f"KEDA cached in {where}" if seconds is None else f"built KEDA into {where} in {seconds:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
