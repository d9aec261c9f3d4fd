"""Members that keep getting lost are damped: not trusted to return until they have stayed up (pure).

Waiting for a lost member is right when it comes back quicker than its tasks restore elsewhere, and a
bounce usually does. A member that bounces again and again — a node that keeps failing, a memory leak,
a crash every few minutes — makes its tasks pay that wait at every loss, and every return throws away
the copies started meanwhile. So a member lost twice within `flapWindow` is *damped*:

* while it is away its tasks are restored elsewhere, as for a member whose pod is not coming back
  (`recovery`): its return is not trusted;
* while it is up it is drained like a member a rolling update will replace: it keeps processing what
  it holds, gets nothing new, and its tasks move off it by warm handoffs, with no downtime;
* it takes tasks again once it has stayed up for `flapWindow` since its last return (`MemberSteady`).

Losses are counted where the engine sees them — a member holding tasks whose pod stopped being ready —
and only within the window, so one crash long ago never marks a member; the count is kept in the
persisted assignment (`Assignment.flaps`), so a restarted operator keeps it. A member is never
damped when that would leave the app with no live member: a bad member is better than none.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from streamapp.rebalance.model import Event, EventKind, Flap, MemberView

DAMPED_AFTER = 2
"""Losses within `flapWindow` that make a member flapping."""


def age(
    flaps: Sequence[Flap], views: Iterable[MemberView], replicas: int, window: float, now: float
) -> tuple[Flap, ...]:
    """The flap records as of `now`, before this step's losses: losses older than the window
    forgotten, each member's time up since its last return, and the records of members up for the
    whole window since they were damped (`steadied`), or no longer wanted, dropped."""
    by_id = {v.id: v for v in views}
    kept: list[Flap] = []
    for flap in flaps:
        view = by_id.get(flap.member)
        if view is None or flap.member >= replicas:
            continue
        up_since = (flap.up_since if flap.up_since is not None else now) if view.alive else None
        if flap.damped and up_since is not None and now - up_since >= window:
            continue
        losses = tuple(t for t in flap.losses if t > now - window)
        if flap.damped or losses:
            kept.append(Flap(flap.member, losses, flap.damped, up_since))
    return tuple(kept)


def steadied(before: Sequence[Flap], after: Sequence[Flap]) -> tuple[int, ...]:
    """Members damped in `before` and no longer in `after`."""
    still = {f.member for f in after if f.damped}
    return tuple(sorted(f.member for f in before if f.damped and f.member not in still))


def lose(flaps: Sequence[Flap], lost: Collection[int], now: float) -> tuple[Flap, ...]:
    """Count a loss at `now` for each of `lost`; a member reaching `DAMPED_AFTER` losses is damped."""
    by_member = {f.member: f for f in flaps}
    for member in sorted(lost):
        flap = by_member.get(member, Flap(member))
        losses = (*flap.losses, now)
        by_member[member] = replace(
            flap, losses=losses, damped=flap.damped or len(losses) >= DAMPED_AFTER, up_since=None
        )
    return tuple(by_member[m] for m in sorted(by_member))


def damped(flaps: Sequence[Flap], views: Iterable[MemberView], replicas: int) -> frozenset[int]:
    """The damped members that are to be treated so: all of them, unless that leaves no member alive,
    wanted and trusted to take work."""
    chosen = frozenset(f.member for f in flaps if f.damped)
    others = [v.id for v in views if v.alive and not v.retiring and v.id < replicas and v.id not in chosen]
    return chosen if others or not chosen else frozenset()


def distrust(views: Iterable[MemberView], members: Collection[int]) -> list[MemberView]:
    """The views with `members` drained: alive ones take nothing new and hand off what they hold."""
    return [replace(v, retiring=True) if v.id in members and v.alive else v for v in views]


def events(before: Sequence[Flap], after: Sequence[Flap], window: float, replicas: int) -> list[Event]:
    """`MemberFlapping` for each member damped in this step, `MemberSteady` for each released that
    is still wanted (a member scaled away is dropped, not steady)."""
    was = {f.member for f in before if f.damped}
    found = [
        Event(
            EventKind.MEMBER_FLAPPING,
            f.member,
            detail=f"lost {len(f.losses)} times within {window:g}s: its tasks move off it until it has "
            f"stayed up {window:g}s",
        )
        for f in after
        if f.damped and f.member not in was
    ]
    found += [
        Event(EventKind.MEMBER_STEADY, m, detail=f"up {window:g}s: it takes tasks again")
        for m in steadied(before, after)
        if m < replicas
    ]
    return found


def steady_at(flaps: Sequence[Flap], window: float) -> Mapping[int, float]:
    """When each damped member that is up takes tasks again if it stays up (a time to wake at)."""
    return {f.member: f.up_since + window for f in flaps if f.damped and f.up_since is not None}
