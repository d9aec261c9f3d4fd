"""One wire model between operator and executor: what one side writes, the other reads, field for field.

The operator writes a StreamAppMember's spec and the executor its status, both through the models of
`streamapp.api.member`; these tests run each side's own code path (the operator's `member_spec` and
`observe`, the executor's `MembershipClient`) and fill every field of the models by introspection, so a
field added to the CRD that one side forgot to carry fails here.
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
import typing
from itertools import count
from pathlib import Path
from typing import Any, Literal

from kubernetes import client
from recordingplane import RecordingPlane

from streamapp.api.codec import field_types, optional_inner
from streamapp.api.member import StreamAppMemberSpec, StreamAppMemberStatus, TaskReport
from streamapp.controller import children
from streamapp.controller.observe import PodState, member_status, member_views
from streamapp.executor.membership import MembershipClient
from streamapp.executor.runtime import Target
from streamapp.rebalance import MemberTarget

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "streamapp"


def filled(model: type[Any], numbers: typing.Iterator[int] | None = None) -> Any:
    """An instance of `model` with every field set to a value unlike its default — but `packed`, a
    wire form of the lists beside it that the model reads back into them (tests/api/test_member_packing.py)."""
    numbers = numbers or count(1)
    hints = field_types(model)
    return model(
        **{f.name: _value(hints[f.name], numbers) for f in dataclasses.fields(model) if f.name != "packed"}
    )


def _value(tp: Any, numbers: typing.Iterator[int]) -> Any:
    tp = optional_inner(tp) or tp
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return filled(typing.cast(type, tp), numbers)
    if origin is Literal:
        return typing.get_args(tp)[-1]
    if origin is tuple:
        return (_value(typing.get_args(tp)[0], numbers),)
    if tp is bool:
        return True
    if tp is int:
        return next(numbers)
    if tp is float:
        return next(numbers) + 0.5
    if tp is str:
        return f"2026-01-01T00:00:{next(numbers) % 60:02d}Z"  # also a valid date-time
    raise TypeError(f"no sample value for {tp!r}: teach this test the new field type")


class RecordingApi:
    """Stands in for CustomObjectsApi: keeps the status the executor writes."""

    def __init__(self) -> None:
        self.statuses: list[dict[str, Any]] = []

    def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> None:
        del kwargs
        self.statuses.append(args[-1]["status"])


def executor(plane: RecordingPlane) -> tuple[MembershipClient, RecordingApi]:
    membership = MembershipClient(client.ApiClient(), "ns", "counts", 2, "pod-uid", plane)
    api = RecordingApi()
    membership.watch.custom = api  # type: ignore[assignment]
    return membership, api


def test_the_spec_the_operator_writes_is_the_target_the_executor_applies() -> None:
    target = MemberTarget(active={5: 4, 0: 3}, revoking={2: 2}, standby=(7, 1), warmup=(9,))
    spec = children.member_spec("counts", 2, target, 7, False, ())
    plane = RecordingPlane()
    membership, _ = executor(plane)
    membership.notice({"metadata": {"uid": "m"}, "spec": spec})
    held_back, applied = plane.applied  # taken up only once confirmed (membership.confirm)
    assert not held_back.active
    assert applied.to_dict() == spec, "the executor's parse loses nothing the operator wrote"
    assert (applied.generation, applied.active_epochs(), applied.revoking_epochs()) == (
        7,
        {0: 3, 5: 4},
        {2: 2},
    )
    assert Target.of(applied) == Target(
        active={0: 3, 5: 4}, standby=frozenset({1, 7}), warmup=frozenset({9}), revoke=frozenset({2})
    )
    assert children.same_target(applied.to_dict(), spec)


def test_every_spec_field_reaches_the_executor() -> None:
    spec = filled(StreamAppMemberSpec)
    plane = RecordingPlane()
    membership, _ = executor(plane)
    membership.notice({"metadata": {"uid": "m"}, "spec": spec.to_dict()})
    assert plane.applied[-1] == spec


def test_every_status_field_the_executor_writes_reaches_the_operator() -> None:
    report = filled(TaskReport)
    membership, api = executor(RecordingPlane([report]))
    target = filled(StreamAppMemberSpec)
    membership.notice({"metadata": {"uid": "m"}, "spec": target.to_dict()})
    written = api.statuses[-1]
    spec = {"memberId": 2, "generation": target.generation}
    body = {"metadata": {"name": "counts-2"}, "spec": spec, "status": written}
    expected = StreamAppMemberStatus(
        observed_generation=membership.applied,
        pod_uid="pod-uid",
        started_at=written["startedAt"],
        reported_at=written["reportedAt"],
        tasks=(report,),
    )
    assert member_status(body) == expected and expected.started_at
    running = {
        "name": "executor",
        "restartCount": 1,
        "state": {"running": {"startedAt": "2000-01-01T00:00:00Z"}},
    }
    pod = {
        "metadata": {"name": "counts-2", "uid": "pod-uid", "labels": {"streamapp.dev/member": "2"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "containerStatuses": [running]},
    }
    assert PodState.of(pod) is not None
    [view] = [v for v in member_views([pod], [body], {}, wanted=0) if v.id == 2]
    assert view.acked_generation == membership.applied
    assert view.lags == {report.task: report.lag}


def test_a_status_the_operator_cannot_read_counts_as_no_report() -> None:
    body = {"metadata": {"name": "counts-2"}, "spec": {"memberId": 2}, "status": {"tasks": [{"task": "x"}]}}
    assert member_status(body) == StreamAppMemberStatus()


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_neither_the_executor_nor_the_api_imports_the_controller() -> None:
    offenders = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for package in ("executor", "api")
        for path in (PACKAGE / package).rglob("*.py")
        for name in _imports(path)
        if name == "streamapp.controller" or name.startswith("streamapp.controller.")
    }
    assert not offenders


def test_the_executor_loads_without_the_controller() -> None:
    """Transitively too: importing every executor module pulls in no controller module."""
    modules = sorted(
        "streamapp.executor." + ".".join(p.relative_to(PACKAGE / "executor").with_suffix("").parts)
        for p in (PACKAGE / "executor").rglob("*.py")
        if p.name != "__init__.py"
    )
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('streamapp.controller')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_whole_number_of_seconds_reads_as_seconds_and_a_boolean_does_not() -> None:
    """JSON does not keep `3.0` apart from `3`: a number field takes both, and nothing else."""
    report = {"task": 1, "role": "active", "resumedAfter": 3, "resumedBy": "restart"}
    assert TaskReport.from_dict(report).resumed_after == 3.0
    body = {"metadata": {"name": "counts-2"}, "spec": {"memberId": 2}}
    assert member_status({**body, "status": {"tasks": [{**report, "resumedAfter": True}]}}) == (
        StreamAppMemberStatus()
    )
