"""What the operator spends per watch event: kopf builds no diff base, because no handler reads one."""

from __future__ import annotations

from typing import Any, cast

import kopf

from streamapp.controller.handlers import UnusedDiffBase, lighten, register
from streamapp.controller.loops import AppLoops
from streamapp.controller.metrics import Metrics

MEMBER: dict[str, Any] = {
    "metadata": {"name": "counts-0", "uid": "u0", "labels": {"streamapp.dev/app": "counts"}},
    "spec": {"app": "counts", "memberId": 0, "generation": 3, "active": [{"task": 1, "epoch": 2}]},
    "status": {"observedGeneration": 3, "tasks": [{"task": 1, "role": "active", "lag": 0}]},
}


def test_no_handler_reads_kopfs_diff_base_so_it_is_not_built() -> None:
    """kopf's essence is read only by change handlers, daemons and timers: if one is ever registered,
    `UnusedDiffBase` must go (kopf's own storage builds the essence it would compare)."""
    registry = kopf.OperatorRegistry()
    register(registry, AppLoops(None, Metrics()))  # type: ignore[arg-type]
    assert registry._changing.get_all_handlers() == []
    assert registry._spawning.get_all_handlers() == []
    assert registry._indexing.get_all_handlers() and registry._watching.get_all_handlers()
    settings = kopf.OperatorSettings()
    lighten(settings)
    assert isinstance(settings.persistence.diffbase_storage, UnusedDiffBase)
    assert settings.persistence.diffbase_storage.build(body=kopf.Body(cast(kopf.RawBody, MEMBER))) == {}
