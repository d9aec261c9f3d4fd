"""`lostTaskRecovery: auto` on real executors: a killed member's tasks are restored elsewhere when that
is quicker than waiting for it, measured from the outside.

The app's state is small (a restore takes a second or so) and its members count as ready only once Spark
has started (the operator's own `/readyz` probe), so a SIGKILLed executor is away for a Spark start,
tens of seconds. Its tasks are restored on the other member and commit there again long before it is
back: each task stands still for about a restore, not a restart. The operator's Events say why; output
stays exactly-once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client
from nodeapp import NodeApp
from operator_support import APP, reasons
from test_returning_member import PARTITIONS

from localcluster.waiting import wait_for
from streamapp.api.names import member_name
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout


def last_batch(state: StateLayout, partition: int) -> tuple[str, float]:
    """Who committed the partition's newest batch, and when (its manifest's commit time)."""
    batches = [m for m in accepted_manifests(state, partition) if m.segments and m.committed_at]
    newest = batches[-1]
    assert newest.committed_at is not None
    return newest.owner, newest.committed_at


def test_a_killed_members_tasks_are_restored_elsewhere_before_it_is_back(
    api_client: client.ApiClient, namespace: str, node_app: Callable[..., NodeApp]
) -> None:
    app = node_app(
        partitions=PARTITIONS, replicas=2, count=4_000, keys=2_000, scheduledRebalanceMaxDelay="5m"
    )
    state = app.state
    wait_for(app.settled, 300, "every task active, nothing warming")
    # Input that arrives once the split is settled, so each task's newest batch names its current owner
    # (the first input may all be committed by member 0 before member 1 is handed its tasks).
    app.more_input(500, 2_000, seed=4)
    wait_for(app.processed, 400, "the settled split committing")
    held = [p for p in range(PARTITIONS) if last_batch(state, p)[0] == member_name(APP, 1)]
    assert held, "member 1 owns tasks"

    app.kill(1)
    killed_at = time.time()
    app.more_input(1_000, 2_000, seed=2)

    def taken_over() -> bool:
        return all(last_batch(state, p)[0] == member_name(APP, 0) for p in held)

    wait_for(taken_over, 240, "member 1's tasks committing on member 0")
    over_at = max(last_batch(state, p)[1] for p in held)
    back = app.ready(1)
    wait_for(lambda: app.ready(1), 300, "member 1 back")
    back_at = time.time()
    assert not back, "member 1 was back before its tasks moved: nothing was tested"
    assert over_at < back_at, (over_at - killed_at, back_at - killed_at)
    said = [r for r in reasons(api_client, namespace) if r in ("RestoringElsewhere", "RestoredElsewhere")]
    assert said, "no Event said the tasks were restored elsewhere"

    wait_for(app.processed, 400, "all input committed")
    wait_for(app.settled, 300, "balanced again")
    app.more_input(1_000, 2_000, seed=3)
    wait_for(app.processed, 400, "all input committed again")
    app.check_output()
