"""The operator's own autoscaler on the real control plane: a scale-out's warmups never trigger a second
scale-out (docs/design.md, invariant 9), and the decision they held back is taken once they are in.

The operator runs as a process, as the suite runs it; member pods sit on kwok nodes and their executors
are played by the fleet: real membership clients, simulated data planes that process the played input
at a set rate per member and report what an executor reports (applied offsets, input lags, processed
records and busy seconds), so the operator measures the input rate and each member's true rate itself.
Copies catch up only while the test lets them. Everything asserted is read from outside: the app's
spec.replicas and status.autoscaling, and the operator's Events.

The rates: 4 partitions, members processing 1,000 records a second each, the utilization target 80 %.
At 1,200 records a second one member falls behind and two suffice (the busiest holds 2 tasks, 600/s);
at 2,400 two fall behind and four are needed (1 task each, 600/s). Each size holds for a measured
input rate a third off either way, so neither decision rests on a precise measurement.
"""

from __future__ import annotations

from typing import Any

import pytest
from fleet import Fleet
from kubernetes import client
from operator_support import APP, Operators, app

from kubesetup import kwok_app
from localcluster.waiting import wait_for
from playedinput import PlayedInput
from streamapp.api.names import APPS, GROUP, VERSION
from streamapp.controller.scaling import RATE_WINDOW

PARTITIONS = 4
MEMBER_RATE = 1_000.0  # records a member processes per second of busy time (its true rate)
FIRST_INPUT, RAISED_INPUT = 1_200.0, 2_400.0  # records a second over all partitions: 2 members, then 4
ACCEPTABLE_LAG = 10_000  # the warmups start 20,000 behind (the fleet's state size): held, they stay above
RELEASED_RESTORE_RATE = 50_000.0
STEP_TIMEOUT_S = 240.0


def autoscaling_app() -> dict[str, Any]:
    """One member of a 4-partition app whose size the operator owns, from 1 to 4."""
    body = kwok_app(
        APP,
        1,
        PARTITIONS,
        "streamapp/executor:dev",
        scheduledRebalanceMaxDelay="5m",
        acceptableRecoveryLag=ACCEPTABLE_LAG,
    )
    body["spec"]["autoscaling"] = {
        "enabled": True,
        "minReplicas": 1,
        "maxReplicas": PARTITIONS,
        "target": {"utilization": 80},
    }
    return body


def scale_events(api: client.ApiClient, namespace: str) -> list[str]:
    """The messages of the operator's ScaledOut and ScaledIn Events on the app."""
    events = client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={APP}"
    )
    return [e.message for e in events.items if e.reason in ("ScaledOut", "ScaledIn")]


def waiting_on_warmups(body: dict[str, Any]) -> bool:
    """Whether the app's autoscaler says it waits for warmups to come within acceptableRecoveryLag."""
    shown = (body.get("status") or {}).get("autoscaling") or {}
    return shown.get("action") == "Wait" and "acceptableRecoveryLag" in (shown.get("waitingFor") or "")


@pytest.mark.timeout(900)
def test_a_scale_out_waits_on_its_warmups_and_the_raised_input_is_acted_on_only_after(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    operators.start()
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, APPS, autoscaling_app()
    )
    played = PlayedInput(PARTITIONS, FIRST_INPUT)
    with Fleet(
        api_client, namespace, APP, restore_rate=0.0, played_input=played, processing_rate=MEMBER_RATE
    ) as fleet:
        # (1) One scale-out, to the size the measured rates call for; then it waits on its warmups,
        # which the test holds where they start.
        def scaled_once() -> dict[str, Any] | None:
            body = app(api_client, namespace)
            assert body["spec"]["replicas"] in (1, 2), body.get("status", {}).get("autoscaling")
            return body if body["spec"]["replicas"] == 2 and waiting_on_warmups(body) else None

        body = wait_for(scaled_once, STEP_TIMEOUT_S, "a scale-out to 2, then a wait on its warmups")
        shown = body["status"]["autoscaling"]
        assert (shown["state"]["previous"], shown["state"]["replicas"]) == (1, 2), shown
        assert "member 1" in shown["waitingFor"], shown

        # (2) The input doubles: 4 members are now needed. While the warmups are held the decision
        # waits, and the lag it lets build is not read as demand: spec.replicas stays at 2 while the
        # lag the operator reports grows by more than a rate window's worth of the raised input.
        played.set_rate(RAISED_INPUT)
        lag_at_raise = int(body["status"].get("inputLag") or 0)
        growth = (RAISED_INPUT - MEMBER_RATE) * RATE_WINDOW

        def lag_grown_while_waiting() -> int | None:
            body = app(api_client, namespace)
            assert body["spec"]["replicas"] == 2, body.get("status", {}).get("autoscaling")
            assert waiting_on_warmups(body), body["status"].get("autoscaling")
            lag = int(body["status"].get("inputLag") or 0)
            return lag if lag >= lag_at_raise + growth else None

        wait_for(
            lag_grown_while_waiting,
            STEP_TIMEOUT_S,
            f"the input lag to grow by {growth:,.0f} records while the autoscaler waits at 2 members",
        )
        events = scale_events(api_client, namespace)
        assert len(events) == 1 and "1 → 2 members" in events[0], events

        # (3) The warmups catch up, are promoted, and the new member processes: the wait ends, and the
        # raised input is acted on.
        fleet.restore_at(RELEASED_RESTORE_RATE)

        def scaled_again() -> dict[str, Any] | None:
            body = app(api_client, namespace)
            assert body["spec"]["replicas"] in (2, PARTITIONS), body.get("status", {}).get("autoscaling")
            return body if body["spec"]["replicas"] == PARTITIONS else None

        body = wait_for(scaled_again, STEP_TIMEOUT_S, f"a scale-out to {PARTITIONS} once the warmups are in")
        shown = body["status"]["autoscaling"]
        assert (shown["state"]["previous"], shown["state"]["replicas"]) == (2, PARTITIONS), shown
        taken = [(task, lag) for task, member, lag in fleet.takeovers if member == 1]
        assert taken and all(lag is not None and lag <= ACCEPTABLE_LAG for _, lag in taken), taken

        # The operator posts the Event right after it scales (`reconcile._autoscale`): wait for it.
        def both_events() -> list[str] | None:
            found = scale_events(api_client, namespace)
            return found if len(found) >= 2 else None

        events = wait_for(both_events, STEP_TIMEOUT_S, "the second ScaledOut Event")
        assert len(events) == 2 and any("2 → 4 members" in e for e in events), events
        assert fleet.violations.double_owned == [], fleet.violations.double_owned
        assert fleet.violations.cold_handoffs == [], fleet.violations.cold_handoffs
