"""Exactly-once checks of a Kafka sink's output against the commit history and the input.

A count pipeline's batch `seq` of task P must appear in the output topic exactly once, as one record
per key of its input range holding that key's running count as of the batch's end offset; nothing
else may appear. Comparing per (task, seq) catches a lost batch (missing group), a duplicated one
(a key twice in a group) and a zombie's (a seq no accepted manifest has).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from kafkabroker.records import Record
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Kind


def expected_outputs(layout: StateLayout, partition: int, keys: Sequence[str]) -> dict[int, dict[str, int]]:
    """seq → {key: running count} for every accepted batch of `partition`; `keys` is its input."""
    expected: dict[int, dict[str, int]] = {}
    running: Counter[str] = Counter()
    for found in accepted_manifests(layout, partition):
        if found.kind is not Kind.BATCH:
            continue
        running.update(keys[found.start : found.end])
        expected[found.seq] = {key: running[key] for key in set(keys[found.start : found.end])}
    return expected


def published_outputs(records: Sequence[Record]) -> dict[tuple[int, int], list[tuple[str, int]]]:
    """(task, seq) → the (key, value) records published for it, in topic order."""
    groups: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
    for record in records:
        task, seq = int(record.header("streamapp.task")), int(record.header("streamapp.seq"))
        groups[(task, seq)].append((record.key, int(record.value)))
    return groups


def differences(
    layout: StateLayout, inputs: Mapping[int, Sequence[str]], records: Sequence[Record]
) -> list[str]:
    """Every way the output differs from the reference (empty when exactly-once held)."""
    problems: list[str] = []
    published = published_outputs(records)
    wanted: set[tuple[int, int]] = set()
    for partition, keys in inputs.items():
        for seq, counts in expected_outputs(layout, partition, keys).items():
            wanted.add((partition, seq))
            got = published.get((partition, seq), [])
            if len(got) != len(dict(got)):
                problems.append(f"task {partition} seq {seq}: {len(got) - len(dict(got))} duplicated records")
            if dict(got) != counts:
                problems.append(f"task {partition} seq {seq}: {len(got)} records, expected {len(counts)}")
    problems += [f"task {t} seq {s}: published but not committed" for t, s in sorted(set(published) - wanted)]
    return problems
