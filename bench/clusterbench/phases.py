"""The scenarios as phases every app goes through in the same order, each a disruption then a wait.

A phase starts with an action (scale, crash, loss, spec change), waits until the app has recovered from
it (`done`), then holds for a while with input flowing; its measurement window is the action to the end
of the hold. Setup phases (a lost member coming back, standbys warming) prepare the next scenario and
are not measured. Members are 0..replicas-1 and the app runs two members between scenarios, so the
first disruption of every scenario hits an app in the same shape under every protocol.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterbench.apps import BenchApp
from localcluster.controlplane import LocalCluster

ROLLED_IMAGE = "unused-on-the-process-node:rolled"
RECOVERY_LAG = 10_000


@dataclass
class Context:
    """What the actions need besides the app: the cluster (for a SIGKILL) and per-app memory."""

    cluster: LocalCluster
    victim: dict[str, int] = field(default_factory=dict)
    settled_at: dict[str, float] = field(default_factory=dict)  # when the app first looked settled
    restarts_before: dict[str, int] = field(default_factory=dict)
    began: dict[str, float] = field(default_factory=dict)
    generation: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Phase:
    """One step of the story; `measured` phases are the scenarios the report names."""

    name: str
    members: int  # members when the phase's action starts
    start: Callable[[BenchApp, Context], None]
    done: Callable[[BenchApp, Context], bool]
    measured: bool = True
    estimate_s: float = 60.0  # until `done`, for the ETA
    prepare: Callable[[BenchApp, Context], None] | None = None  # before the window opens


def _scale(replicas: int) -> Callable[[BenchApp, Context], None]:
    def start(app: BenchApp, ctx: Context) -> None:
        app.scale(replicas)
        app.event(f"scale to {replicas}")

    return start


def _processing(app: BenchApp, ctx: Context, replicas: int) -> bool:
    """Settled on `replicas` members, and every task has committed since the app first looked
    settled: a task still restoring where it moved (minutes, in the large regime) has not recovered
    though the assignment is at rest."""
    if not app.settled(replicas):
        return False
    since = ctx.settled_at.setdefault(app.protocol, time.time())
    return app.committed_since(since)


def _settled(replicas: int) -> Callable[[BenchApp, Context], bool]:
    return lambda app, ctx: _processing(app, ctx, replicas)


def _scaled(replicas: int) -> Callable[[BenchApp, Context], bool]:
    return lambda app, ctx: not app.pod_exists(replicas) and _processing(app, ctx, replicas)


def _bounce(app: BenchApp, ctx: Context) -> None:
    victim = ctx.victim[app.protocol] = app.busiest_member()
    ctx.restarts_before[app.protocol] = app.pod_restarts(victim)
    ctx.began[app.protocol] = time.time()
    app.kill(ctx.cluster, victim)
    app.event(f"SIGKILL m{victim}")


def _bounced(app: BenchApp, ctx: Context) -> bool:
    victim = ctx.victim[app.protocol]
    return (
        app.pod_restarts(victim) > ctx.restarts_before[app.protocol]
        and app.committed_since(ctx.began[app.protocol])
        and _processing(app, ctx, 2)
    )


def _no_room(app: BenchApp, ctx: Context) -> None:
    ctx.victim[app.protocol] = app.busiest_member()
    app.no_room()


def _lose(app: BenchApp, ctx: Context) -> None:
    victim = ctx.victim[app.protocol]
    ctx.began[app.protocol] = time.time()
    app.lose(victim)
    app.event(f"m{victim} lost (pod deleted, no room)")


def _survived(app: BenchApp, ctx: Context) -> bool:
    """Every task owned by a live member and committing again (the lost member does not return)."""
    tasks = app.status().get("tasks") or {}
    return (
        app.committed_since(ctx.began[app.protocol])
        and tasks.get("active") == app.partitions
        and not tasks.get("reserved")
    )


def _return(app: BenchApp, ctx: Context) -> None:
    app.room_again()
    app.patch({"rebalance": {"standbyReplicas": 0}})
    app.event("room again")


def _standbys(app: BenchApp, ctx: Context) -> None:
    patch = {"rebalance": {"standbyReplicas": 1, "failoverToStandby": True}}
    ctx.generation[app.protocol] = app.patch(patch)
    app.event("standbyReplicas 1")


def _rolled(app: BenchApp, ctx: Context) -> bool:
    """Settled on the new revision: the operator must have seen the change first (until then the
    status still shows the old revision everywhere, which looks settled)."""
    return app.observed(ctx.generation[app.protocol]) and _processing(app, ctx, 2)


def _standbys_ready(app: BenchApp, ctx: Context) -> bool:
    return app.caught_up_standbys(ctx.generation[app.protocol], RECOVERY_LAG)


def _roll(app: BenchApp, ctx: Context) -> None:
    ctx.generation[app.protocol] = app.patch({"executor": {"image": ROLLED_IMAGE}})
    app.event("executor.image changed")


def story() -> list[Phase]:
    """The scenarios in order."""
    settled = _settled(2)
    return [
        Phase("scale-out", 2, _scale(3), _settled(3), estimate_s=90),
        Phase("scale-in", 3, _scale(2), _scaled(2), estimate_s=40),
        Phase("bounce", 2, _bounce, _bounced, estimate_s=60),
        Phase("permanent-loss", 2, _lose, _survived, estimate_s=120, prepare=_no_room),
        Phase("return", 1, _return, settled, measured=False, estimate_s=90),
        Phase("standbys-warm", 2, _standbys, _standbys_ready, measured=False, estimate_s=60),
        Phase("permanent-loss-standby", 2, _lose, _survived, estimate_s=40, prepare=_no_room),
        Phase("return-again", 1, _return, settled, measured=False, estimate_s=90),
        Phase("rolling-restart", 2, _roll, _rolled, estimate_s=180),
    ]
