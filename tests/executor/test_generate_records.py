"""The generator is deterministic and partitions keys stably."""

from __future__ import annotations

from pathlib import Path

from streamapp.executor.generate import GenerateSpec, due, generate, make_records, partition_of
from streamapp.executor.source import FileLog


def test_records_do_not_depend_on_how_appends_were_chunked() -> None:
    whole = make_records(seed=3, start=0, count=1000, keys=50)
    first = make_records(seed=3, start=0, count=400, keys=50)
    rest = make_records(seed=3, start=400, count=600, keys=50)
    assert whole == (first[0] + rest[0], first[1] + rest[1])
    assert make_records(seed=4, start=0, count=1000, keys=50) != whole


def test_rate_limits_what_is_due() -> None:
    spec = GenerateSpec(partitions=2, count=1000, rate=100.0)
    assert due(spec, produced=0, elapsed=0.5) == 50
    assert due(spec, produced=50, elapsed=0.5) == 0
    assert due(spec, produced=990, elapsed=100.0) == 10


def test_generate_appends_every_record_once_to_the_keys_partition(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "log")
    spec = GenerateSpec(partitions=3, count=5000, keys=200, seed=1, chunk=1200)
    assert generate(log, spec) == 5000
    assert generate(log, spec) == 10000
    keys = make_records(seed=1, start=0, count=10000, keys=200)[0]
    for partition in range(3):
        table = log.read_arrow(partition)
        assert table.column("offset").to_pylist() == list(range(table.num_rows))
        assert table.column("key").to_pylist() == [k for k in keys if partition_of(k, 3) == partition]
