"""`python -m s3server install|down [--dir DIR]`: install the pinned server, or stop a started one."""

from __future__ import annotations

import argparse
from pathlib import Path

from localcluster.controlplane import default_root
from s3server import install, server


def main() -> int:
    parser = argparse.ArgumentParser(prog="s3server", description=__doc__)
    parser.add_argument("command", choices=("install", "down"))
    parser.add_argument("--dir", default=None, help="state directory (default: the cluster directory)")
    args = parser.parse_args()
    if args.command == "install":
        took = install.ensure_installed()
        where = install.server_binary()
        print(f"S3 server cached: {where}" if took is None else f"built {where} in {took:.0f}s")
        return 0
    state_dir = default_root() if args.dir is None else Path(args.dir)
    print("S3 server stopped" if server.stop(state_dir) else "no S3 server running")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
