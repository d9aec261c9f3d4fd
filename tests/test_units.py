"""Durations as every setting spells them (the API model, the engine, the executor, the simulator)."""

from __future__ import annotations

import pytest

from streamapp.units import UnitError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300), ("30s", 30), ("1h30m", 5400), ("250ms", 0.25), (90, 90), ("45", 45)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["5 minutes", "", "-1s", True, None, "1d", "721h"])
def test_bad_durations_name_the_key(bad: object) -> None:
    with pytest.raises(UnitError, match="scheduledRebalanceMaxDelay"):
        parse_duration(bad, "scheduledRebalanceMaxDelay")


@pytest.mark.parametrize(
    ("seconds", "text"), [(600.0, "10m"), (7200.0, "2h"), (45.0, "45s"), (0.25, "250ms")]
)
def test_durations_are_written_in_their_shortest_spelling(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text and parse_duration(text) == seconds
