"""One typed path through a reconcile: the body is parsed once, `decide` is pure and returns the
status as the model, and nothing after the parse reads the app's raw body."""

from __future__ import annotations

import copy
import importlib
import inspect
import pkgutil
from dataclasses import replace

from test_reconcile_memo import settled_app

import streamapp.controller
from streamapp.api.streamapp import StreamApp, StreamAppStatus
from streamapp.controller.decision import decide
from streamapp.controller.memo import Memo
from streamapp.controller.observe import Observed
from streamapp.controller.status import failing_status, invalid_spec_status

TYPED_APP = {"StreamApp", "ObjectMeta", "str"}
"""What a controller function may take as `app`: the parsed app, its metadata, or its name."""


def test_no_controller_function_takes_the_apps_raw_body() -> None:
    """Every function of the controller that takes the app takes it typed. The raw body reaches only
    the shell's entry points, as `body`: `reconcile` (through `Observed`) parses it, and a body that
    does not parse is read only for its envelope (`reconcile._refuse`, `reconcile.report_failure`)."""
    untyped = []
    for module in pkgutil.iter_modules(streamapp.controller.__path__):
        loaded = importlib.import_module(f"streamapp.controller.{module.name}")
        for name, function in inspect.getmembers(loaded, inspect.isfunction):
            if function.__module__ != loaded.__name__:
                continue
            parameter = inspect.signature(function).parameters.get("app")
            if parameter is not None and parameter.annotation not in TYPED_APP:
                untyped.append(f"{module.name}.{name}(app: {parameter.annotation})")
    assert untyped == []


def test_decide_is_pure_and_returns_the_status_as_the_model() -> None:
    """The same inputs give the same decision, with no API at hand; its status is a `StreamAppStatus`
    whose intent the next parse reads back as the plan's assignment."""
    _, observed, _, _ = settled_app()
    app = StreamApp.from_resource(observed.app)
    first = decide(app, observed.owned(), 30.0, Memo())
    again = decide(app, observed.owned(), 30.0, Memo())
    assert first == again
    assert isinstance(first.status, StreamAppStatus)
    assert first.rebuilt is None
    stored = StreamApp.from_resource({**observed.app, "status": first.status.to_dict()})
    assert decide(stored, observed.owned(), 31.0, Memo()).previous == first.plan.assignment


def test_a_damaged_intent_is_a_decision_to_rebuild_it_not_a_write() -> None:
    """`decide` says why it rebuilt the intent from the members' targets; posting the Warning Event is
    the act's (`reconcile`), so deciding touches nothing."""
    _, observed, _, _ = settled_app()
    damaged = copy.deepcopy(dict(observed.app))
    damaged["status"]["intent"] = {"tasks": "garbage"}
    app = StreamApp.from_resource(damaged)
    decision = decide(app, replace(observed, app=damaged).owned(), 30.0, Memo())
    assert decision.rebuilt is not None and "unreadable" in decision.rebuilt
    assert all(task.active is not None for task in decision.previous.tasks), "every owner kept"


def test_the_observed_children_are_only_this_incarnations() -> None:
    _, observed, _, _ = settled_app()
    recreated = {**observed.app, "metadata": {**observed.app["metadata"], "uid": "another"}}
    assert Observed(recreated, observed.pods, observed.members, {}, observed.supporting).owned() == Observed(
        recreated, (), (), {}, ()
    )


FOREIGN = {
    "type": "example.com/Audited",
    "status": "True",
    "reason": "Checked",
    "message": "set by another tool",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
    "observedGeneration": 1,
}


def test_a_condition_type_the_operator_does_not_set_is_read_and_kept_by_every_writer() -> None:
    """Condition types are open: one another tool (or another version of the operator) wrote parses,
    and the step's status, a refused spec's and a failing reconcile's all keep it as it was."""
    _, observed, _, _ = settled_app()
    body = copy.deepcopy(dict(observed.app))
    body["status"]["conditions"] = [*body["status"]["conditions"], FOREIGN]
    app = StreamApp.from_resource(body)
    step = decide(app, replace(observed, app=body).owned(), 30.0, Memo())
    assert FOREIGN in [c.to_dict() for c in step.status.conditions]
    stored = app.status.conditions
    for patch in (
        invalid_spec_status(app.metadata, stored, "spec.replicas: must be >= 0", "2026-01-02T00:00:00Z"),
        failing_status(app.metadata, stored, "the API server refused a pod", "2026-01-02T00:00:00Z"),
    ):
        assert FOREIGN in patch["conditions"]
