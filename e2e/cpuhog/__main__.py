"""`python -m cpuhog [--hogs N] -- COMMAND...`: run COMMAND while N processes spin at full speed.

A test that passes only when the machine is idle fails for users, whose first `make test` runs beside
builds at a load of 10 or more, and in CI on shared cores. Spinning one busy process per core (at
the same priority as the tests) halves what the tests get and stretches every gap between their
threads, so waits on the wall clock and races with the operator show up here first. The hogs are
killed when COMMAND ends, however it ends; the exit code is COMMAND's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import time


def _spin() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cpuhog", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--hogs", type=int, default=os.cpu_count() or 1, help="busy processes (default: one per core)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.hogs)]
    for hog in hogs:
        hog.start()
    started = time.monotonic()
    print(f"cpuhog: {args.hogs} busy processes beside: {' '.join(command)}", flush=True)
    try:
        code = subprocess.call(command)
    except KeyboardInterrupt:
        code = 130
    finally:
        for hog in hogs:
            hog.terminate()
        for hog in hogs:
            hog.join()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"cpuhog: exit {code} after {time.monotonic() - started:.0f} s (load average now {load})", flush=True
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
