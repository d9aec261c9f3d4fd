"""Kafka data plane benchmark: the StreamApp executor with the Kafka source and sink, side by side with
Structured Streaming's Kafka source, on the same topic, with equal batch sizes; writes Markdown.

Run `PYTHONPATH=e2e python bench/kafkabench.py --write bench/results/kafka.md` (`make bench` does). It starts the
test broker (`e2e/kafkabroker`) unless one runs under the cluster directory, and resolves
`spark-sql-kafka-0-10` from Maven Central through `spark.jars.packages` (cached in
~/.cache/streamapp/spark-kafka/<connector version>/).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import benchreport
from dataplane import Run, machine, streaming_run
from kafkabroker import records
from kafkabroker.broker import KafkaBroker
from localcluster.gotool import cache_base
from streamapp.executor import pipeline as pipelines
from streamapp.executor.io.kafkaclient import KafkaEndpoint, ensure_topic
from streamapp.executor.io.kafkasink import KafkaSink
from streamapp.executor.io.kafkasource import KafkaSource
from streamapp.executor.io.sink import FileSink, Sink
from streamapp.executor.pipeline import keyed_updates
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.spark import SparkSettings, session
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.task import TaskConfig

COUNTS = "streamapp.executor.samples.counts:counts"
PARTITIONS = 2
# Spark's Kafka connector: the newest release on Maven Central (none for pyspark's own 4.3.0 yet).
SPARK_KAFKA_VERSION = "4.2.0"
NOTE = """\
Same input topic (2 partitions, keyed records produced once before the runs), same pipeline (a keyed
running count, every updated row written out), same SparkSession (`local[*]`). A StreamApp batch covers
one partition (`max_batch_records`), read by explicit offsets with the Python client into Arrow, and
includes the changelog segment, the staged outputs, the commit manifest and — with the Kafka sink — the
transaction that publishes the rows and the marker. A Structured Streaming batch reads both partitions
through Spark's Kafka source (`maxOffsetsPerTrigger` = 2 × the StreamApp batch, so equal records per
partition per batch), counts with RocksDB state and writes updated rows to a Kafka topic (its Kafka
sink: at least once). Batch times are per micro-batch; throughput is input records per wall second."""


@dataclass(frozen=True)
class Scenario:
    name: str
    records: int
    per_batch: int
    keys: int


def spark_with_kafka() -> SparkSession:
    """The bench's session, with Spark's Kafka connector for the Structured Streaming side."""
    version = SPARK_KAFKA_VERSION
    ivy = cache_base() / "spark-kafka" / version / "ivy"
    ivy.mkdir(parents=True, exist_ok=True)
    conf = {
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}",
        "spark.jars.ivy": str(ivy),
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }
    return session(SparkSettings(app_name="streamapp-kafkabench", conf=conf))


def run_streamapp(root: Path, bootstrap: str, topic: str, scenario: Scenario, kafka_sink: bool) -> Run:
    """Both partitions active on one executor; one micro-batch per `per_batch` records per partition."""
    layout = StateLayout(root / f"sa-state-{kafka_sink}")
    source = KafkaSource(KafkaEndpoint(bootstrap, topic))
    out = KafkaEndpoint(bootstrap, f"{topic}-sa-out")
    sink: Sink = (
        KafkaSink(out, layout, "bench", PARTITIONS, namespace="bench")
        if kafka_sink
        else FileSink(root / "sa-out")
    )
    if kafka_sink:
        ensure_topic(out, PARTITIONS)
    executor = Executor(
        layout, source, sink, pipelines.load(COUNTS), TaskConfig(max_batch_records=scenario.per_batch)
    )
    executor.apply(Target(active={p: 1 for p in range(PARTITIONS)}))
    executor.step()  # take over (and, with the Kafka sink, initialise the transactional producers)
    batch_ms: list[float] = []
    began = time.perf_counter()
    busy = True
    while busy:
        busy = False
        for partition in range(PARTITIONS):
            start = time.perf_counter()
            if executor.tasks[partition].step():
                batch_ms.append(1000 * (time.perf_counter() - start))
                busy = True
    seconds = time.perf_counter() - began
    source.close()
    system = "StreamApp: Kafka source + " + ("Kafka sink (exactly-once)" if kafka_sink else "file sink")
    return Run(system, scenario.name, scenario.records, len(batch_ms), seconds, batch_ms)


def run_structured_streaming(
    spark: SparkSession, root: Path, bootstrap: str, topic: str, scenario: Scenario
) -> Run:
    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", PARTITIONS * scenario.per_batch)
        .load()
    )
    out = f"{topic}-ss-out"
    ensure_topic(KafkaEndpoint(bootstrap, out), PARTITIONS)
    query = (
        stream.select(F.col("key").cast("string").alias("key"))
        .groupBy("key")
        .count()
        .select("key", F.col("count").cast("string").alias("value"))
        .writeStream.outputMode("update")
        .format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", str(root / "ss-checkpoint"))
        .trigger(availableNow=True)
    )
    return streaming_run("Structured Streaming: Kafka source + Kafka sink", scenario.name, query)


SOURCE_NOTE = """\
One partition's offsets `[0, n)` read and run through the same transform and Spark-side combine
(`keyed_updates` of the count pipeline), median of 3 reads after one warm-up: the Python client
(librdkafka → Arrow → `createDataFrame`, what the executor uses) against Spark's Kafka batch source
(`spark.read.format("kafka")` with `assign` and explicit `startingOffsets`/`endingOffsets`)."""


def source_reads(spark: SparkSession, bootstrap: str, topic: str, sizes: list[int]) -> list[str]:
    """Rows of the per-batch read comparison (see SOURCE_NOTE)."""
    pipeline = pipelines.load(COUNTS)
    client = KafkaSource(KafkaEndpoint(bootstrap, topic))

    def spark_batch(size: int) -> None:
        frame = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("assign", json.dumps({topic: [0]}))
            .option("startingOffsets", json.dumps({topic: {"0": 0}}))
            .option("endingOffsets", json.dumps({topic: {"0": size}}))
            .load()
            .select(
                "offset",
                "timestamp",
                F.col("key").cast("string").alias("key"),
                F.col("value").cast("string").alias("value"),
            )
        )
        keyed_updates(pipeline, frame)

    def ours(size: int) -> None:
        keyed_updates(pipeline, client.read(spark, 0, 0, size))

    rows = []
    for size in sizes:
        medians = []
        for read in (ours, spark_batch):
            read(size)
            times = []
            for _ in range(3):
                began = time.perf_counter()
                read(size)
                times.append(1000 * (time.perf_counter() - began))
            medians.append(statistics.median(times))
        rows.append(f"| {size:,} | {medians[0]:,.0f} | {medians[1]:,.0f} |")
    client.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    args = benchreport.arguments(__doc__ or "", argv)
    scale = 10 if args.quick else 1
    scenarios = [
        Scenario("small batches", 40_000 // scale, 1_000 // scale, 5_000),
        Scenario("large batches", 400_000 // scale, 50_000 // scale, 50_000),
    ]
    command = " ".join(["python", "bench/kafkabench.py", *(argv if argv is not None else sys.argv[1:])])
    broker = KafkaBroker()
    started_here = not broker.is_running()
    bootstrap = broker.up()
    spark = spark_with_kafka()
    root = Path(tempfile.mkdtemp(prefix="streamapp-kafkabench-"))
    lines = [
        "# Kafka data plane benchmark",
        "",
        f"Produced by `.venv/bin/{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        "",
        f"Machine: {machine()}; spark-sql-kafka-0-10 {SPARK_KAFKA_VERSION}. Broker: one local KRaft node (e2e/kafkabroker) on the same machine.",
        "",
        "The machine was shared with concurrent builds and tests, so absolute figures move by tens of percent",
        "between runs; the comparisons within one run (same topic, same session, back to back) are what",
        "this file is for.",
        "",
        "## Keyed running count from a Kafka topic",
        "",
        NOTE,
        "",
        "| scenario | system | records/batch | batches | p50 ms/batch | p95 ms/batch | records/s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    last_topic = ""
    try:
        for scenario in scenarios:
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            ensure_topic(KafkaEndpoint(bootstrap, topic), PARTITIONS)
            records.produce(bootstrap, topic, PARTITIONS, 7, 0, scenario.records, scenario.keys)
            case = root / scenario.name.replace(" ", "-")
            runs = [
                run_streamapp(case, bootstrap, topic, scenario, kafka_sink=True),
                run_streamapp(case, bootstrap, topic, scenario, kafka_sink=False),
                run_structured_streaming(spark, case, bootstrap, topic, scenario),
            ]
            lines += [run.row() for run in runs]
            last_topic = topic
        sizes = [1_000 // scale, 10_000 // scale, 50_000 // scale]
        lines += [
            "",
            "## Reading one micro-batch: Python client vs Spark's Kafka batch source",
            "",
            SOURCE_NOTE,
            "",
            "| records | Python client (ms) | Spark Kafka batch source (ms) |",
            "|---:|---:|---:|",
            *source_reads(spark, bootstrap, last_topic, sizes),
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if started_here:
            broker.down()
    benchreport.emit(lines, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
