"""Which changelog compaction keeps for members' local checkpoints (`state.retention.decide`), as
properties over any marks, segment sizes and bounds, and the spec's spelling of the bounds."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamapp.executor.state.retention import Mark, Retention, decide, retention_of
from streamapp.executor.task import DEFAULT_RETENTION

NOW = 10_000.0

marks = st.lists(
    st.builds(
        Mark,
        member=st.sampled_from(["a", "b", "c", "d"]),
        seq=st.integers(0, 60),
        at=st.floats(NOW - 7_200, NOW),
    ),
    unique_by=lambda mark: mark.member,
    max_size=4,
)
segments = st.dictionaries(st.integers(0, 60), st.integers(1, 1_000), max_size=60)
retentions = st.builds(Retention, seconds=st.floats(0, 7_200), max_bytes=st.integers(1, 20_000))


def held(delete_through: int, covered: int, sizes: dict[int, int]) -> int:
    return sum(size for seq, size in sizes.items() if delete_through < seq <= covered)


@given(marks, segments, st.integers(-1, 60), retentions)
def test_a_restore_from_the_oldest_kept_snapshot_always_finds_its_segments(
    found: list[Mark], sizes: dict[int, int], covered: int, retention: Retention
) -> None:
    assert decide(found, sizes, covered, retention, NOW).delete_through <= covered


@given(marks, segments, st.integers(-1, 60), retentions)
def test_every_kept_mark_is_young_enough_and_finds_its_delta_within_the_bound(
    found: list[Mark], sizes: dict[int, int], covered: int, retention: Retention
) -> None:
    decision = decide(found, sizes, covered, retention, NOW)
    kept = [mark for mark in found if mark not in decision.dropped]
    for mark in kept:
        assert NOW - mark.at <= retention.seconds
        assert decision.delete_through <= mark.seq, "its delta stays"
    if kept:
        assert held(decision.delete_through, covered, sizes) <= retention.max_bytes


@given(marks, segments, st.integers(-1, 60), retentions)
def test_a_mark_is_dropped_only_when_expired_or_older_than_every_mark_that_fits_the_bound(
    found: list[Mark], sizes: dict[int, int], covered: int, retention: Retention
) -> None:
    """Over the size bound the oldest checkpoint loses its delta first: no younger-in-history mark is
    dropped while an older one is kept."""
    decision = decide(found, sizes, covered, retention, NOW)
    kept = [mark for mark in found if mark not in decision.dropped]
    for mark in decision.dropped:
        expired = NOW - mark.at > retention.seconds
        assert expired or all(other.seq >= mark.seq for other in kept)
        if not expired:
            assert held(min(covered, mark.seq), covered, sizes) > retention.max_bytes


def test_without_marks_compaction_deletes_what_the_oldest_snapshot_covers() -> None:
    assert decide([], {1: 10, 2: 10}, 2, DEFAULT_RETENTION, NOW).delete_through == 2


def test_a_young_mark_keeps_the_segments_after_it_and_an_old_one_is_dropped() -> None:
    young, old = Mark("a", 3, NOW - 60), Mark("b", 1, NOW - 4_000)
    decision = decide(
        [young, old], dict.fromkeys(range(10), 100), 8, replace(DEFAULT_RETENTION, seconds=3_600), NOW
    )
    assert (decision.delete_through, decision.dropped) == (3, (old,))


def test_the_spec_spelling_is_parsed_and_a_bad_one_named() -> None:
    assert retention_of("30m", "512Mi") == Retention(seconds=1_800, max_bytes=512 << 20)
    with pytest.raises(ValueError, match="deltaRetention"):
        retention_of("soon", "1Gi")
    with pytest.raises(ValueError, match="deltaRetentionSize"):
        retention_of("1h", "0")
