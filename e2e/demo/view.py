"""The live table: one row per task with its owner, its other copies, its lag and what it committed; pure.

Rendering takes a `Snapshot` (what the driver read from the API server and the manifests at one
instant) and returns lines, so the view is tested without a cluster. `streamapp.terminal.Screen` redraws
it in place (the same screen `streamapp status --watch` uses).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamapp.terminal import BOLD, DIM, RESET, Screen, fit

__all__ = ["RESET", "Screen", "Snapshot", "TaskRow", "fit", "render", "rows"]
ROLE_ORDER = ("active", "revoking", "warmup", "standby")


@dataclass(frozen=True)
class Snapshot:
    """What the demo saw at one instant."""

    elapsed: float
    phase: str
    partitions: int
    members: Sequence[Mapping[str, Any]]
    pods: Mapping[str, str]
    committed: Mapping[int, int]
    input_end: Mapping[int, int]
    last_commit_age: Mapping[int, float | None]
    events: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class TaskRow:
    """One task as the table shows it."""

    task: int
    owner: str
    copies: str
    lag: int
    committed: int
    last_commit: str


def owners(members: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Task → the member the operator made its active owner (spec), `-` while it has none."""
    found: dict[int, str] = {}
    for member in members:
        for entry in (member.get("spec") or {}).get("active") or []:
            found[int(entry["task"])] = short(member)
    return found


def copies(members: Sequence[Mapping[str, Any]]) -> dict[int, list[str]]:
    """Task → the copies executors report other than active, e.g. `m2 warmup lag 120`."""
    found: dict[int, list[tuple[int, str]]] = {}
    for member in members:
        for report in (member.get("status") or {}).get("tasks") or []:
            role = str(report.get("role"))
            if role == "active":
                continue
            lag = report.get("lag")
            text = f"{short(member)} {role}" + (f" lag {lag:,}" if lag is not None else "")
            rank = ROLE_ORDER.index(role) if role in ROLE_ORDER else len(ROLE_ORDER)
            found.setdefault(int(report["task"]), []).append((rank, text))
    return {task: [text for _, text in sorted(entries)] for task, entries in found.items()}


def short(member: Mapping[str, Any]) -> str:
    """`m<id>`: the member's static id, short enough for a narrow terminal."""
    return f"m{(member.get('spec') or {}).get('memberId', '?')}"


def rows(snapshot: Snapshot) -> list[TaskRow]:
    """The table's rows; lag is measured from outside: input appended but not committed yet."""
    owner_of, copies_of = owners(snapshot.members), copies(snapshot.members)
    result = []
    for task in range(snapshot.partitions):
        committed = snapshot.committed.get(task, 0)
        age = snapshot.last_commit_age.get(task)
        result.append(
            TaskRow(
                task=task,
                owner=owner_of.get(task, "-"),
                copies=", ".join(copies_of.get(task, [])) or "-",
                lag=max(0, snapshot.input_end.get(task, 0) - committed),
                committed=committed,
                last_commit="never" if age is None else f"{age:.1f}s ago",
            )
        )
    return result


def member_line(snapshot: Snapshot) -> str:
    """`members: m0 Running 2 active · m1 …`, from the members' specs and their pods' states."""
    parts = []
    for member in sorted(snapshot.members, key=lambda m: (m.get("spec") or {}).get("memberId", 0)):
        name = str((member.get("metadata") or {}).get("name", ""))
        active = len((member.get("spec") or {}).get("active") or [])
        parts.append(f"{short(member)} {snapshot.pods.get(name, 'no pod')} {active} active")
    return "members: " + (" · ".join(parts) if parts else "none yet")


def render(snapshot: Snapshot, color: bool = True) -> list[str]:
    """The whole frame as lines."""
    bold, dim, reset = (BOLD, DIM, RESET) if color else ("", "", "")
    minutes, seconds = divmod(int(snapshot.elapsed), 60)
    total_in = sum(snapshot.input_end.values())
    total_done = sum(snapshot.committed.values())
    lines = [
        f"{bold}streamapp demo{reset}  {minutes:02d}:{seconds:02d}  {bold}{snapshot.phase}{reset}",
        f"input {total_in:,} records, committed {total_done:,}",
        member_line(snapshot),
        "",
        f"{bold}{'task':>4}  {'owner':<5}  {'lag':>7}  {'committed':>9}  {'last commit':>11}  other copies{reset}",
    ]
    for row in rows(snapshot):
        lines.append(
            f"{row.task:>4}  {row.owner:<5}  {row.lag:>7,}  {row.committed:>9,}  {row.last_commit:>11}  {row.copies}"
        )
    lines.append("")
    lines.extend(f"{dim}{event}{reset}" for event in snapshot.events[-5:])
    return lines
