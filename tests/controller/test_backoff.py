"""The operator's retry delays: capped, jittered, endless and new on every iteration (as kopf uses them)."""

from __future__ import annotations

import itertools

from streamapp.controller.backoff import Backoffs, delay


def test_delays_double_up_to_the_cap_with_the_upper_half_random() -> None:
    assert [delay(n, 1.0, 5.0, lambda: 1.0) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert [delay(n, 1.0, 5.0, lambda: 0.0) for n in range(1, 6)] == [0.5, 1.0, 2.0, 2.5, 2.5]


def test_kopf_backoffs_never_run_out_and_start_over_for_every_request() -> None:
    backoffs = Backoffs(initial=1.0, cap=5.0)
    first = list(itertools.islice(backoffs, 1000))
    assert len(first) == 1000 and max(first) <= 5.0 and min(first) >= 0.5
    assert next(iter(backoffs)) <= 1.0, "a new request starts from the shortest delay"
