"""One round of micro-batches: every due partition of an executor gets one batch, in one Spark job.

A small micro-batch spends most of its time on Spark's per-job overhead (planning, scheduling, the
Arrow transfer), not on its records, so an executor with 30 partitions paying 30 jobs per round is
mostly overhead. A round reads each due partition's range, transforms each on its own, unions them with
the partition as a literal column added after the transform, combines by (partition, key) and crosses to
Python once (`pipeline.keyed_updates_by_partition`). Folding and committing stay per partition: each
gets its own segment, outputs and manifest, committed side by side with the others (`COMMITTERS`), and a
lost manifest race (a conflict or a fence) is settled for that partition alone — the others' commits
neither depend on it nor repeat.

A round with a single due partition uses the per-partition job, which skips the union and the split;
`TaskConfig.shared_batches` turns sharing off (the benchmark compares both).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from streamapp.executor.pipeline import keyed_updates, keyed_updates_by_partition
from streamapp.executor.state.manifest import Fenced
from streamapp.executor.task import Task, TaskContext

READERS = 8
"""Threads that define the partitions' input DataFrames side by side: defining one is a few driver
round trips (listing its files, resolving the plan), waited for, not computed, in Python."""
COMMITTERS = 8
"""Threads that commit the partitions of a round side by side: a commit is mostly waiting on I/O (the
segment, outputs and manifest writes to the shared store, a Kafka transaction of ~300 ms), so one after
another a round of 30 partitions waited 30 transactions. Each task's commit touches only its own state,
files and producer."""
RECORDS_PER_SLICE = 100_000
"""Input records per scan task of a shared job: a round smaller than this runs as one task (task
scheduling, not the records, is most of a small round's cost); larger rounds use up to every core."""


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
    spark = context.spark()
    with ThreadPoolExecutor(min(READERS, len(planned)), "read") as readers:
        read = readers.map(
            lambda planned: context.source.read(spark, planned[0].partition, *planned[1]), planned
        )
        frames = {task.partition: frame for (task, _), frame in zip(planned, read, strict=True)}
    records = sum(end - start for _, (start, end) in planned)
    slices = max(1, min(spark.sparkContext.defaultParallelism, -(-records // RECORDS_PER_SLICE)))
    updates = keyed_updates_by_partition(context.pipeline, frames, slices)

    def commit(planned: tuple[Task, tuple[int, int]]) -> int:
        task, span = planned
        return task.racing(partial(task.commit_batch, span, updates[task.partition]))

    with ThreadPoolExecutor(min(COMMITTERS, len(planned)), "commit") as committers:
        done += sum(committers.map(commit, planned))
    return done


def _alone(context: TaskContext, task: Task, span: tuple[int, int]) -> int:
    """One partition's batch as its own Spark job."""
    batch = context.source.read(context.spark(), task.partition, *span)
    return task.commit_batch(span, keyed_updates(context.pipeline, batch))
