"""Names kubectl resolves: categories never shadow a resource name; task sets print as short ranges."""

from __future__ import annotations

import pytest

from streamapp.api.member import MAX_TASK_RANGES_CHARS, task_ranges
from streamapp.render.crd import crds


def test_no_category_equals_a_resource_name() -> None:
    """kubectl expands a category before it maps a resource name, so a category equal to a name turns
    `kubectl get streamapp x` into a request for two types ("you must specify only one resource")."""
    names = set()
    categories = set()
    for doc in crds():
        spec_names = doc["spec"]["names"]
        names |= {spec_names["plural"], spec_names["singular"], spec_names["kind"].lower()}
        names |= set(spec_names["shortNames"])
        categories |= set(spec_names["categories"])
    assert categories and not categories & names


@pytest.mark.parametrize(
    ("tasks", "text"),
    [
        ([], ""),
        ([5], "5"),
        ([3, 0, 1, 2, 8], "0-3,8"),
        ([0, 2, 4], "0,2,4"),
        ([1, 2, 9, 10, 11, 20], "1-2,9-11,20"),
        (range(300), "0-299"),
    ],
)
def test_task_ranges(tasks: list[int], text: str) -> None:
    assert task_ranges(tasks) == text


def test_a_long_task_set_is_cut_at_a_range_and_says_how_many() -> None:
    text = task_ranges(range(0, 900, 7))
    assert len(text) <= MAX_TASK_RANGES_CHARS
    shown, _, rest = text.partition(",…")
    assert rest == "(129 tasks)"
    assert shown.split(",") == [str(t) for t in range(0, 7 * len(shown.split(",")), 7)]
