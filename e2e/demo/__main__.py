"""`python -m demo` (e2e/ and tests/executor on the path; `make demo` sets them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from demo.driver import Settings, main
from demo.view import Screen


def parse(argv: list[str] | None = None) -> Settings:
    root = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    root.add_argument("--out", type=Path, default=Path("out"), help="where the run's files and plot go")
    root.add_argument("--partitions", type=int, default=4)
    root.add_argument("--rate", type=float, default=100.0, help="input records per second, all tasks")
    root.add_argument("--steady-seconds", type=float, default=20.0, help="undisturbed time between steps")
    args = root.parse_args(argv)
    return Settings(out=args.out, partitions=args.partitions, rate=args.rate, steady_s=args.steady_seconds)


if __name__ == "__main__":
    sys.exit(main(parse(), Screen()))
