"""Synthetic input for demos, tests and benchmarks: keyed records appended to the file log at a rate.

Record `i` (a global index across partitions) is a pure function of `(seed, i)` — a SplitMix64 hash picks
its key out of `keys` and its value in 1..100 — so the same seed yields the same records however the
appends were chunked in time. A key always lands in the same partition (`crc32(key) mod partitions`),
as with Kafka's default partitioner. Timestamps are the wall-clock time of the append. `pace` keeps the
rate for any destination: the file log here, a Kafka topic in `kafkafeed`.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from streamapp.executor.io.source import FileLog

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def make_records(seed: int, start: int, count: int, keys: int) -> tuple[list[str], list[str]]:
    """Keys and values of records `start .. start+count-1`; pure."""
    with np.errstate(over="ignore"):
        indices = np.arange(start, start + count, dtype=np.uint64) + np.uint64(seed) * _GOLDEN
    mixed = _splitmix64(indices)
    key_ids = (mixed % np.uint64(keys)).tolist()
    values = (np.uint64(1) + (mixed >> np.uint64(32)) % np.uint64(100)).tolist()
    return [f"k{k:08d}" for k in key_ids], [str(v) for v in values]


def partition_of(key: str, partitions: int) -> int:
    """The partition a key belongs to; pure and stable across processes (unlike `hash`)."""
    return zlib.crc32(key.encode()) % partitions


def split_by_partition(
    keys: list[str], values: list[str], partitions: int
) -> dict[int, tuple[list[str], list[str]]]:
    """Group records by partition, keeping their order; pure."""
    grouped: dict[int, tuple[list[str], list[str]]] = {}
    for key, value in zip(keys, values, strict=True):
        ks, vs = grouped.setdefault(partition_of(key, partitions), ([], []))
        ks.append(key)
        vs.append(value)
    return grouped


@dataclass(frozen=True)
class GenerateSpec:
    """How much to generate: `count` records (None: until stopped) at `rate` per second in total
    (0 = as fast as possible)."""

    partitions: int
    count: int | None
    rate: float = 0.0
    keys: int = 10_000
    seed: int = 0
    chunk: int = 50_000


def append_chunk(log: FileLog, spec: GenerateSpec, start: int, count: int, now: datetime) -> None:
    """Append records `start .. start+count-1` to the log, one segment per partition touched."""
    keys, values = make_records(spec.seed, start, count, spec.keys)
    for partition, (ks, vs) in sorted(split_by_partition(keys, values, spec.partitions).items()):
        stamps = pa.array([now] * len(ks), type=pa.timestamp("us", tz="UTC"))
        log.append(partition, pa.table({"timestamp": stamps, "key": ks, "value": vs}))


def due(spec: GenerateSpec, produced: int, elapsed: float) -> int:
    """How many records should be appended now to keep to the rate; pure."""
    remaining = spec.chunk if spec.count is None else spec.count - produced
    if spec.rate <= 0:
        return min(spec.chunk, remaining)
    return max(0, min(int(spec.rate * elapsed) - produced, spec.chunk, remaining))


Append = Callable[[int, int, datetime], None]
"""Writes records `start .. start+count-1` of the stream, whole, stamped with the given time."""


def generate(
    log: FileLog,
    spec: GenerateSpec,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    tick: float = 0.1,
    stopped: Callable[[], bool] = lambda: False,
) -> int:
    """Append `spec.count` records (or until `stopped()`) after what the log already holds; returns the
    global end index (`pace`)."""
    first = sum(log.end_offset(p) for p in range(spec.partitions))

    def append(start: int, count: int, now: datetime) -> None:
        append_chunk(log, spec, start, count, now)

    return pace(spec, first, append, clock, sleep, tick, stopped)


def pace(
    spec: GenerateSpec,
    first: int,
    append: Append,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    tick: float = 0.1,
    stopped: Callable[[], bool] = lambda: False,
) -> int:
    """Write `spec.count` records (or until `stopped()`) from global index `first` (what the destination
    already holds, so a restarted generator continues the stream); returns the global end index. A
    chunk is always written whole, so a stop never leaves the partitions misaligned with the global
    record index. At a rate, writes are `tick` seconds apart, so the destination grows by one segment
    (or one flush) per partition per tick rather than by one per record."""
    produced = 0
    began = clock()
    while (spec.count is None or produced < spec.count) and not stopped():
        count = due(spec, produced, clock() - began)
        if count:
            append(first + produced, count, datetime.now(UTC))
            produced += count
        if not count or spec.rate > 0:
            sleep(tick)  # at a rate, one write per tick: what is due since then goes in one segment
    return first + produced
