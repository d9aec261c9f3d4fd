"""`lostTaskRecovery: delay`: a member whose executor restarts is waited for without copies of its tasks
warming elsewhere.

Measured from the outside on real executors. The app's delay is short (12 s), and its members count as
ready only once Spark has started (the operator's own `/readyz` probe), so a SIGKILLed executor stays away past half the delay: the point from which the tasks of a
member that is simply gone are pre-warmed on the others. Its pod shows its container restarting, so
the operator starts no copy of those tasks until the deadline and shows the member as Restarting;
output stays exactly-once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from nodeapp import NodeApp

from localcluster.waiting import wait_for

PARTITIONS = 4
DELAY_SECONDS = 12.0
POLL_SECONDS = 0.2


# make test-long: `delay` is not the default; make test keeps its rule as a property
# (tests/rebalance/test_invariants.py: no pre-warm while the member is visibly returning).
@pytest.mark.long
def test_a_restarting_member_gets_no_prewarmed_copies(node_app: Callable[..., NodeApp]) -> None:
    app = node_app(
        partitions=PARTITIONS,
        replicas=2,
        count=4_000,
        keys=2_000,
        scheduledRebalanceMaxDelay=f"{DELAY_SECONDS:g}s",
        lostTaskRecovery="delay",
    )
    wait_for(app.settled, 300, "every task active, nothing warming")

    app.kill(1)
    wait_for(lambda: (app.status().get("tasks") or {}).get("reserved", 0) > 0, 60, "member 1 lost")
    lost_at = time.monotonic()

    # From just past half the delay to just before the deadline, while member 1 is still away.
    warming: list[int] = []
    phases: set[str] = set()
    while time.monotonic() < lost_at + DELAY_SECONDS - 1 and not app.ready(1):
        status = app.status()
        counts = status.get("tasks") or {}
        if time.monotonic() > lost_at + DELAY_SECONDS / 2 + 1:
            assert counts.get("reserved", 0) > 0, f"member 1's tasks released before the deadline: {counts}"
            warming.append(counts.get("warming", 0))
            phases |= {m["phase"] for m in status.get("members") or [] if m["id"] == 1}
        time.sleep(POLL_SECONDS)
    assert len(warming) >= 5, "member 1 was back before the pre-warm point: nothing was tested"
    assert not any(warming), f"copies warmed for a member whose pod was restarting: {warming}"
    assert phases == {"Restarting"}, f"member 1 shown as {phases} while its pod restarted"

    app.more_input(1_000, 2_000, seed=2)
    wait_for(app.processed, 400, "all input committed again")
    app.check_output()
