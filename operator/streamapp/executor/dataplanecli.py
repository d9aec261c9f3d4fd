"""`streamapp generate` (append synthetic records to a file log) and `streamapp dataplane` (run the
executor data plane for a fixed assignment, without Kubernetes — for demos, benchmarks and
fault-injection tests).

The pod command `streamapp executor --from-cluster` belongs to the membership loop, which follows the
member's StreamAppMember instead of a fixed assignment; it can reuse `add_dataplane_arguments` and
`build_executor` so both commands configure the data plane the same way.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any

from streamapp.api.streamapp import DEFAULT_DELTA_RETENTION, DEFAULT_DELTA_RETENTION_SIZE, DEFAULT_LOCAL_STORE
from streamapp.executor import pipeline as pipelines
from streamapp.executor.io.generate import GenerateSpec, generate, pace
from streamapp.executor.io.sink import FileSink
from streamapp.executor.io.source import FileLog
from streamapp.executor.runtime import LOG_FORMAT, Executor, Target
from streamapp.executor.spark import SparkSettings, session
from streamapp.executor.state import blobstore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import STORE_KINDS, LocalState
from streamapp.executor.state.retention import retention_of
from streamapp.executor.state.storage import write_atomic
from streamapp.executor.task import TaskConfig


def parse_partitions(text: str) -> frozenset[int]:
    """`0,2,5` → {0, 2, 5}; pure."""
    return frozenset(int(p) for p in text.split(",") if p)


def parse_active(text: str) -> dict[int, int]:
    """`0=3,1=3` (partition=epoch) → {0: 3, 1: 3}; pure."""
    pairs = (item.split("=", 1) for item in text.split(",") if item)
    return {int(p): int(e) for p, e in pairs}


def parse_conf(items: list[str]) -> dict[str, str]:
    """Repeated `key=value` → dict; pure."""
    return dict(item.split("=", 1) for item in items)


def run_generate(args: argparse.Namespace) -> int:
    """Append records to a file log or a Kafka topic; without `--count`, until SIGTERM or SIGINT (a
    sample's input that keeps flowing)."""
    spec = GenerateSpec(
        partitions=args.partitions, count=args.count, rate=args.rate, keys=args.keys, seed=args.seed
    )
    if (args.kafka is None) != (args.topic is None) or (args.create_topic and args.kafka is None):
        print(
            "streamapp generate: --topic and --create-topic go with --kafka (and --kafka needs --topic)",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.kafka is None:
        log = FileLog(Path(args.log))
        first = sum(log.end_offset(p) for p in range(args.partitions))
        end = generate(log, spec, tick=args.interval, stopped=stop.is_set)
        print(f"appended {end - first} records; log holds {end}")
        return 0
    from streamapp.executor.io import kafkafeed
    from streamapp.executor.io.kafkaclient import KafkaEndpoint, credentials

    # The same credential variables as an executor's Kafka source (the StreamApp's credentialsSecret).
    endpoint = KafkaEndpoint(args.kafka, args.topic, credentials(os.environ, "source"))
    kafkafeed.ensure_topics(endpoint, dict.fromkeys([args.topic, *args.create_topic]), args.partitions)
    feed = kafkafeed.KafkaFeed(endpoint, spec)
    first = feed.end()
    print(f"producing to {args.topic} ({args.partitions} partitions) from record {first}", flush=True)
    end = pace(spec, first, feed.append, tick=args.interval, stopped=stop.is_set)
    print(f"produced {end - first} records; {args.topic} holds {end}")
    return 0


def add_dataplane_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that configure the data plane itself: paths, pipeline, batching, Spark."""
    parser.add_argument(
        "--state",
        required=True,
        help="state store: a path or s3://bucket/prefix (manifests, changelog, snapshots)",
    )
    parser.add_argument("--log", required=True, help="input file log")
    parser.add_argument("--sink", help="output directory or s3:// prefix (default <state>/outputs)")
    parser.add_argument("--pipeline", required=True, help="transform as module:function")
    parser.add_argument(
        "--merge", help="override the declared merge (sum|count|min|max|last|module:function)"
    )
    parser.add_argument("--value-type", help="override the declared state value type (long|double|string)")
    parser.add_argument(
        "--lateness", type=float, help="seconds a window stays open after newer ones (windowed pipelines)"
    )
    parser.add_argument("--member", default="", help="owner name recorded in manifests")
    parser.add_argument("--max-batch-records", type=int, default=TaskConfig.max_batch_records)
    parser.add_argument(
        "--snapshot-every", type=int, default=TaskConfig.snapshot_every, help="batches per snapshot"
    )
    parser.add_argument(
        "--local-state",
        default=os.environ.get("STREAMAPP_STATE_DIR"),
        help="this executor's own state directory (default $STREAMAPP_STATE_DIR, as in a member pod): "
        "tasks keep their stores and checkpoints there and a restart replays only the delta; "
        "without it state is in memory only and every start restores in full",
    )
    parser.add_argument(
        "--local-store",
        choices=STORE_KINDS,
        default=DEFAULT_LOCAL_STORE,
        help="lmdb (default): state larger than memory; memory: a dict, faster while it fits",
    )
    parser.add_argument(
        "--delta-retention",
        default=DEFAULT_DELTA_RETENTION,
        help="how long the changelog after a member's local checkpoint is kept, and its local state of a "
        f"task it left (stateStore.deltaRetention; default {DEFAULT_DELTA_RETENTION})",
    )
    parser.add_argument(
        "--delta-retention-size",
        default=DEFAULT_DELTA_RETENTION_SIZE,
        help="at most this much changelog per task kept for checkpoints beyond the snapshots' needs "
        f"(stateStore.deltaRetentionSize; default {DEFAULT_DELTA_RETENTION_SIZE})",
    )
    parser.add_argument("--spark-master", default="local[*]")
    parser.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value (repeatable)")


def build_executor(args: argparse.Namespace) -> Executor:
    """An executor configured from `add_dataplane_arguments` options (Spark starts on first use)."""
    state = blobstore.open_uri(args.state)
    settings = SparkSettings(master=args.spark_master, conf=parse_conf(args.conf))
    pipeline = pipelines.load(
        args.pipeline, merge=args.merge, value_type=args.value_type, lateness=args.lateness
    )
    return Executor(
        StateLayout(state),
        FileLog(Path(args.log)),
        FileSink(blobstore.open_uri(args.sink) if args.sink else state.child("outputs")),
        pipeline,
        TaskConfig(
            max_batch_records=args.max_batch_records,
            snapshot_every=args.snapshot_every,
            owner=args.member,
            retention=retention_of(args.delta_retention, args.delta_retention_size),
        ),
        spark=lambda: session(settings),
        local=(
            LocalState(Path(args.local_state), args.local_store, pipeline.value_type)
            if args.local_state
            else None
        ),
    )


def _status_json(executor: Executor) -> bytes:
    rows: list[dict[str, Any]] = [asdict(s) for s in executor.status()]
    return json.dumps(rows, sort_keys=True).encode()


def run_dataplane(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    executor = build_executor(args)
    executor.apply(
        Target(
            active=parse_active(args.active),
            standby=parse_partitions(args.standby),
            warmup=parse_partitions(args.warmup),
        )
    )
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)

    def report_and_check() -> bool:
        if args.status:
            write_atomic(Path(args.status), _status_json(executor))
        return stopping

    if args.until_idle:
        while executor.step() > 0 and not report_and_check():
            pass
        report_and_check()
    else:
        executor.run(report_and_check)
    executor.apply(Target())  # every task checkpoints its local state (the status file keeps the last report)
    if executor.context.local is not None:
        executor.context.local.close()
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gen = subparsers.add_parser(
        "generate", help="append synthetic keyed records to a file log or a Kafka topic"
    )
    where = gen.add_mutually_exclusive_group(required=True)
    where.add_argument("--log", help="log directory (partitions under p=<P>/)")
    where.add_argument(
        "--kafka",
        metavar="BOOTSTRAP",
        help="produce to a Kafka topic on these bootstrap servers instead (with --topic); credentials from "
        "the variables an executor's Kafka source reads",
    )
    gen.add_argument(
        "--topic", help="with --kafka: the topic, created with --partitions partitions if absent"
    )
    gen.add_argument(
        "--create-topic",
        action="append",
        default=[],
        metavar="NAME",
        help="with --kafka: another topic to create if absent, with --partitions partitions (repeatable; "
        "e.g. the app's output topic)",
    )
    gen.add_argument("--partitions", type=int, required=True)
    gen.add_argument("--count", type=int, help="records to append (default: until SIGTERM or Ctrl-C)")
    gen.add_argument("--rate", type=float, default=0.0, help="records per second in total; 0 = unthrottled")
    gen.add_argument(
        "--interval", type=float, default=0.1, help="seconds between appends at a rate (one file each)"
    )
    gen.add_argument("--keys", type=int, default=10_000, help="distinct keys")
    gen.add_argument("--seed", type=int, default=0)
    gen.set_defaults(run=run_generate)

    plane = subparsers.add_parser(
        "dataplane", help="run the executor data plane for a fixed assignment (no Kubernetes)"
    )
    add_dataplane_arguments(plane)
    plane.add_argument("--active", default="", help="partition=epoch,... to process")
    plane.add_argument("--standby", default="", help="partitions to keep hot copies of")
    plane.add_argument("--warmup", default="", help="partitions to warm up")
    plane.add_argument("--status", help="file to rewrite with per-task status JSON after every step")
    plane.add_argument("--until-idle", action="store_true", help="exit once all input has been processed")
    plane.set_defaults(run=run_dataplane)


def main(argv: list[str] | None = None) -> int:
    """Run these subcommands without the rest of the `streamapp` CLI (`python -m streamapp.executor.dataplanecli`)."""
    parser = argparse.ArgumentParser(prog="streamapp-executor")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
