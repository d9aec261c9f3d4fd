"""The generator is deterministic and partitions keys stably."""

from __future__ import annotations

from pathlib import Path

from streamapp.executor.io.generate import GenerateSpec, due, generate, make_records, partition_of
from streamapp.executor.io.source import FileLog


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


def test_at_a_rate_appends_come_one_per_tick_not_one_per_record(tmp_path: Path) -> None:
    """A slow append (as on a loaded machine) must not turn into a file per record: whatever came due
    meanwhile goes into the next tick's segment."""
    log = FileLog(tmp_path / "log")
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def clock() -> float:
        now[0] += 0.02  # every look at the clock finds time has passed: appends take time
        return now[0]

    spec = GenerateSpec(partitions=2, count=2000, rate=200.0, keys=50, seed=1)
    generate(log, spec, clock=clock, sleep=sleep, tick=1.0)
    segments = [p for p in (tmp_path / "log").rglob("*.parquet") if not p.name.startswith(".tmp-")]
    assert 10 <= now[0] <= 12, "ten seconds of input at 200 records/s"
    assert len(segments) <= 2 * 12, f"{len(segments)} segments for about 11 ticks and 2 partitions"
