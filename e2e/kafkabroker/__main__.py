"""``python -m kafkabroker up|down|status`` (with ``e2e`` on PYTHONPATH): the broker of this cluster dir."""

from __future__ import annotations

import argparse
import sys

from kafkabroker.broker import KafkaBroker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkabroker", description=__doc__)
    parser.add_argument("command", choices=("up", "down", "status"))
    args = parser.parse_args(argv)
    broker = KafkaBroker()
    if args.command == "up":
        print(f"kafka up: bootstrap servers {broker.up()}")
    elif args.command == "down":
        broker.down()
        print("kafka down")
    else:
        running = broker.is_running()
        print(f"running: {broker.bootstrap}" if running else "not running")
        return 0 if running else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
