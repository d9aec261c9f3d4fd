"""Folding batch updates into state, without Spark."""

from __future__ import annotations

from typing import Any

import pytest

from streamapp.executor.merge import Merge, fold, resolve


def test_builtin_merges_fold_into_existing_values_without_mutating_them() -> None:
    current = {"a": 5, "b": 1}
    assert fold(current, ["a", "c"], [2, 7], resolve("sum")) == {"a": 7, "c": 7}
    assert fold(current, ["a", "b"], [3, 9], resolve("min")) == {"a": 3, "b": 1}
    assert fold(current, ["a", "b"], [3, 9], resolve("max")) == {"a": 5, "b": 9}
    assert fold(current, ["a"], [0], resolve("last")) == {"a": 0}
    assert current == {"a": 5, "b": 1}


def test_a_user_merge_sees_updates_one_by_one_in_order() -> None:
    def append(old: Any, new: Any) -> Any:
        return new if old is None else f"{old},{new}"

    merge = resolve(append)
    assert fold({"a": "x"}, ["a", "b", "a"], ["y", "z", "w"], merge) == {"a": "x,y,w", "b": "z"}


def test_unknown_merges_are_rejected() -> None:
    with pytest.raises(ValueError):
        resolve("median")


def test_merges_resolve_from_module_paths() -> None:
    assert resolve("builtins:max") == Merge(name="builtins:max", user=max)
