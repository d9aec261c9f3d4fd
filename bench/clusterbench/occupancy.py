"""What ran on the shared cores, second by second: every app's members running, starting or lost.

Nothing in a recorded run says when a pod's JVM started or stopped; two things say it well enough. A
member is *running* while its executor commits batches (the owner of a commit manifest is its pod), and
a member that committed nothing for more than `STOPPED_S` seconds had stopped: no slowed batch of the
bench took as long. Between two running stretches, or before its first, a member is *starting* (its
pod coming up, its JVM and Spark session starting, its tasks restoring) unless it was *lost* (deleted
with no room for it: between "mX lost" and "room again"). The events the phases logged tell how each
start came about, in the contention model's words (`streamapp.sim.contention.StartKind`): an app created
or scaled out (a `new` member), a SIGKILL (its container `restarted`), room again after a loss or a
rollout (the operator `replaced` its pod).

Pure: it reads the run's events and commits, as `raw.load` rebuilds them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from clusterbench.apps import BenchApp
from streamapp.sim.contention import StartKind

STOPPED_S = 8.0
"""A member that committed nothing for longer had stopped (its slowest batches took ~6 s)."""

State = Literal["running", "starting", "lost"]


@dataclass(frozen=True)
class Stretch:
    """One member of one app in one state from `since` to `until` (seconds since the epoch); `kind` is
    how the start it belongs to came about (a running stretch: the start it followed)."""

    protocol: str
    member: int
    state: State
    since: float
    until: float
    kind: StartKind


@dataclass(frozen=True)
class _Event:
    at: float
    replicas: int | None = None  # the app's members from now on
    kind: StartKind | None = None  # a start of this kind begins now (for `member`, or any member)
    member: int | None = None
    lost: bool = False  # `member` is lost until the next start of it


def _events(app: BenchApp) -> list[_Event]:
    """The phases' log lines (`clusterbench.phases`, `runner`) as what they did to the members."""
    found = []
    lost: int | None = None
    for at, label in sorted(app.events):
        if created := re.match(r"app created: (\d+) members", label):
            found.append(_Event(at, replicas=int(created[1]), kind="new"))
        elif scaled := re.match(r"scale to (\d+)", label):
            found.append(_Event(at, replicas=int(scaled[1]), kind="new"))
        elif killed := re.match(r"SIGKILL m(\d+)", label):
            found.append(_Event(at, kind="restarted", member=int(killed[1])))
        elif gone := re.match(r"m(\d+) lost", label):
            lost = int(gone[1])
            found.append(_Event(at, member=lost, lost=True))
        elif label == "room again" and lost is not None:
            found.append(_Event(at, kind="replaced", member=lost))
            lost = None
        elif label.startswith("executor.image changed"):
            found.append(_Event(at, kind="replaced"))
    return found


def _running(app: BenchApp, member: int) -> list[tuple[float, float]]:
    """The member's stretches of commits no more than `STOPPED_S` apart."""
    times = sorted(c.at for c in app.commits.commits if c.owner.rsplit("-", 1)[-1] == str(member))
    stretches: list[tuple[float, float]] = []
    for at in times:
        if stretches and at - stretches[-1][1] <= STOPPED_S:
            stretches[-1] = (stretches[-1][0], at)
        else:
            stretches.append((at, at))
    return stretches


def stretches(app: BenchApp) -> list[Stretch]:
    """Every member's running, starting and lost stretches, in time order per member."""
    events = _events(app)
    members = sorted({int(c.owner.rsplit("-", 1)[-1]) for c in app.commits.commits})
    out: list[Stretch] = []
    for member in members:
        created = min((e.at for e in events if e.replicas is not None and member < e.replicas), default=None)
        if created is None:
            continue
        stopped = created
        for since, until in _running(app, member):
            if since > stopped:
                out += _between(app.protocol, member, stopped, since, events)
            out.append(Stretch(app.protocol, member, "running", since, until, _kind(events, member, since)))
            stopped = until
    return out


def _between(
    protocol: str, member: int, stopped: float, back: float, events: Sequence[_Event]
) -> list[Stretch]:
    """A member not committing from `stopped` to `back`: lost from then if a loss of it came before it
    was started again, starting otherwise."""
    kind = _kind(events, member, back)
    loss = next((e.at for e in events if e.lost and e.member == member and stopped <= e.at < back), None)
    if loss is None:
        return [Stretch(protocol, member, "starting", stopped, back, kind)]
    again = next((e.at for e in events if e.kind and e.member == member and loss <= e.at <= back), back)
    return [
        Stretch(protocol, member, "lost", stopped, again, kind),
        Stretch(protocol, member, "starting", again, back, kind),
    ]


def _kind(events: Sequence[_Event], member: int, at: float) -> StartKind:
    """How the member's latest start before `at` came about."""
    kinds = [e.kind for e in events if e.kind is not None and e.member in (None, member) and e.at <= at]
    return kinds[-1] if kinds else "new"


@dataclass(frozen=True)
class Moment:
    """The cores at one moment, over every app: the executors running (how long each had been), and
    the pods starting by kind."""

    running: tuple[float, ...]
    starting: dict[StartKind, int]


def moment(found: Sequence[Stretch], at: float) -> Moment:
    """Executors running and pods starting at `at`, over every app's stretches in `found`."""
    running = tuple(at - s.since for s in found if s.state == "running" and s.since <= at <= s.until)
    starting = Counter(s.kind for s in found if s.state == "starting" and s.since <= at < s.until)
    return Moment(running, dict(starting))


def of_member(found: Sequence[Stretch], protocol: str, member: int, at: float) -> Stretch | None:
    """The member's stretch at `at` (None: it was no member then)."""
    return next(
        (s for s in found if s.protocol == protocol and s.member == member and s.since <= at <= s.until),
        None,
    )
