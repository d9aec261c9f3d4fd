"""One round of micro-batches: every due partition of an executor gets one batch, in one Spark job.

A small micro-batch spends most of its time on Spark's per-job overhead (planning, scheduling, the
Arrow transfer), not on its records, so an executor with 30 partitions paying 30 jobs per round is
mostly overhead. A round reads each due partition's range, transforms each on its own, unions them with
the partition as a literal column added after the transform, combines by (partition, key) and crosses to
Python once (`pipeline.combined_updates`). Folding and committing stay per partition: each
gets its own segment, outputs and manifest, committed side by side with the others (`COMMITTERS`), and a
lost manifest race (a conflict or a fence) is settled for that partition alone — the others' commits
neither depend on it nor repeat.

A round with a single due partition uses the per-partition job, which skips the union and the split;
`TaskConfig.shared_batches` turns sharing off (the benchmark compares both).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pyarrow as pa
from pyspark.sql import DataFrame

from streamapp.executor.io.source import ReadsInProcess, ScansSpans, arrow_frame
from streamapp.executor.pipeline import combined_updates, keyed_updates, labelled, updates_by_input_key
from streamapp.executor.state.manifest import Fenced
from streamapp.executor.task import Task, TaskContext

log = logging.getLogger(__name__)

READERS = 8
"""Threads that define the partitions' input DataFrames and transform them side by side: defining one
is a few driver round trips (listing its files, analysing the transform's plan), waited for, not
computed, in Python."""
COMMITTERS = 8
"""Threads that commit the partitions of a round side by side: a commit is mostly waiting on I/O (the
segment, outputs and manifest writes to the shared store, a Kafka transaction of ~300 ms), so one after
another a round of 30 partitions waited 30 transactions. Each task's commit touches only its own state,
files and producer."""
RECORDS_PER_SLICE = 100_000
"""Input records per scan task of a shared job: a round smaller than this runs as one task (task
scheduling, not the records, is most of a small round's cost); larger rounds use up to every core."""

SCAN_RECORDS = 50_000
"""A round of more records than this, for a pipeline whose keys come from its input, is scanned by
Spark from the source's files in one scan (when the source can) instead of handed over as Arrow: the
hand-over costs the JVM a conversion per record, a scan mostly a file open per partition. Measured once on
the counts sample (the transform and combine of one round, 2 cores): 8 × 1,000 records, Arrow 174 ms
against a scan's 347; 4 × 10,000, 189 against 193; 8 × 10,000, 320 against 283; 32 × 10,000, 1,724
against 636. The keys are still read in process, to give each update its partition."""


def run_round(context: TaskContext, tasks: Sequence[Task]) -> int:
    """One micro-batch for each of `tasks` (all due: owning active and unfenced); returns the records
    consumed plus the manifests applied by tasks that lost a race."""
    done = 0
    planned: list[tuple[Task, tuple[int, int]]] = []
    for task in tasks:
        try:
            span = task.next_batch()
        except Fenced as fenced:
            done += task.lost(fenced)
            continue
        if span is not None:
            planned.append((task, span))
    if len(planned) < 2 or not context.config.shared_batches:
        return done + sum(task.racing(partial(_alone, context, task, span)) for task, span in planned)
    updates = _shared_updates(context, planned)

    def commit(planned: tuple[Task, tuple[int, int]]) -> int:
        task, span = planned
        return task.racing(partial(task.commit_batch, span, updates[task.partition]))

    with ThreadPoolExecutor(min(COMMITTERS, len(planned)), "commit") as committers:
        done += sum(committers.map(commit, planned))
    return done


def _shared_updates(
    context: TaskContext, planned: Sequence[tuple[Task, tuple[int, int]]]
) -> dict[int, pa.Table]:
    """Every planned batch's updates from one Spark job: one transform over all the records when the
    pipeline's keys come from its input and the source reads them here, else one per partition."""
    spark = context.spark()
    records = sum(end - start for _, (start, end) in planned)
    slices = max(1, min(spark.sparkContext.defaultParallelism, -(-records // RECORDS_PER_SLICE)))
    read = _read_in_process(context, planned)
    if read is not None and None not in read.values():
        found = {partition: table for partition, table in read.items() if table is not None}
        scanned = None
        if records > SCAN_RECORDS and isinstance(context.source, ScansSpans):
            scanned = context.source.scan(spark, {task.partition: span for task, span in planned})
        updates = updates_by_input_key(context.pipeline, spark, found, slices, scanned)
        if updates is not None:
            return updates
        _promise_broken(context.pipeline.name)

    def frame(planned: tuple[Task, tuple[int, int]]) -> DataFrame:
        partition, span = planned[0].partition, planned[1]
        table = None if read is None else read[partition]
        batch = context.source.read(spark, partition, *span) if table is None else arrow_frame(spark, table)
        return labelled(context.pipeline, partition, batch)

    with ThreadPoolExecutor(min(READERS, len(planned)), "read") as readers:
        frames = {
            task.partition: found
            for (task, _), found in zip(planned, readers.map(frame, planned), strict=True)
        }
    return combined_updates(context.pipeline, frames, slices)


def _read_in_process(
    context: TaskContext, planned: Sequence[tuple[Task, tuple[int, int]]]
) -> dict[int, pa.Table | None] | None:
    """The planned spans' records read here, side by side (None per span the source leaves to a Spark
    scan), when the pipeline can use them all in one transform; None when it cannot."""
    source = context.source
    if not context.pipeline.keys_from_input or not isinstance(source, ReadsInProcess):
        return None
    with ThreadPoolExecutor(min(READERS, len(planned)), "read") as readers:
        tables = readers.map(
            lambda planned: source.read_in_process(planned[0].partition, *planned[1]), planned
        )
        return {task.partition: table for (task, _), table in zip(planned, tables, strict=True)}


@functools.cache
def _promise_broken(pipeline: str) -> None:
    """Said once per pipeline: a round's updates were not keyed by its input's keys (or a key was in
    two partitions' input), so rounds of it run one transform per partition when that happens."""
    log.warning(
        "pipeline %s declares keys_from_input, but a round's updates had keys of no input record or an "
        "input key was in two partitions: such rounds run one transform per partition",
        pipeline,
    )


def _alone(context: TaskContext, task: Task, span: tuple[int, int]) -> int:
    """One partition's batch as its own Spark job, its keys looked up beside it (`Task.read_ahead`)."""
    with ThreadPoolExecutor(1, "read-ahead") as readers:
        known = task.read_ahead(span, readers)
        batch = context.source.read(context.spark(), task.partition, *span)
        return task.commit_batch(span, keyed_updates(context.pipeline, batch), known)
