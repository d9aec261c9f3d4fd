"""`status.intent` in a compact, versioned form that fits 100,000 tasks in one object (pure).

The intent is the engine's whole `Assignment`, written before any child is touched. Its first form
(`Assignment.to_dict`: one JSON object per task) costs ~70 bytes per task and puts the StreamApp past
etcd's 1.5 MiB request limit near 21,000 tasks. Format 2 stores the per-task fields as four columns
— owner, epoch, standbys, warmups — of comma-separated decimal text, deflated and base64-encoded, and
only the sparse fields (revocations in flight, reservations, flapping members) as JSON.

Why columns plus deflate rather than a run-length encoding of owners: the engine hands pending tasks
to the least-loaded member with ties broken by id, so a fresh app's owners cycle 0, 1, …, M-1 and
owner runs are one task long; a member's task set has no ranges either. Deflate finds that period
(a few hundred bytes for 100,000 tasks), finds the runs epochs do form, and, once rebalances have
scattered owners, still costs about the entropy of the assignment (≈ log2(members) bits per task,
~2 bytes per task and per copy at 1,000 members, bench/results/scale.md) instead of a byte count
that depends on the shape. Text inside keeps it inspectable: `base64 -d | zlib-flate -uncompress`.

Decoding is strict, because a wrong intent is worse than none (the reconcile then rebuilds it from
the members, `recovery.intent_from_members`): base64 is validated, deflate's checksum catches damage,
the text may hold only digits and separators, and every column must hold exactly `partitions`
entries. Format 1 (no `format` key, `tasks` a list) is still read, so an operator upgraded in place
resumes from the intent its predecessor wrote and rewrites it as format 2 on its first write.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from streamapp.rebalance import Assignment
from streamapp.rebalance.model import (
    Reservation,
    TaskAssignment,
    flap_from_dict,
    flap_to_dict,
    reservation_from_dict,
    reservation_to_dict,
)

FORMAT = 2
COLUMNS = ("owner", "epoch", "standbys", "warmups")
KEYS = frozenset(
    (
        "format",
        "generation",
        "partitions",
        "columns",
        "revoking",
        "reservations",
        "membership",
        "nextProbeAt",
        "flaps",
    )
)
_TEXT = re.compile(r"[0-9+,\n]*")
_RANGES = re.compile(r"([0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)?")


def encode(assignment: Assignment) -> dict[str, Any]:
    """The format-2 intent of `assignment` (JSON-ready; `decode` gives the same assignment back)."""
    tasks = assignment.tasks
    columns = [
        ",".join("" if t.active is None else str(t.active) for t in tasks),
        ",".join(str(t.epoch) for t in tasks),
        ",".join("+".join(map(str, t.standbys)) for t in tasks),
        ",".join("+".join(map(str, t.warmups)) for t in tasks),
    ]
    packed = zlib.compress("\n".join(columns).encode("ascii"), 9)
    return {
        "format": FORMAT,
        "generation": assignment.generation,
        "partitions": len(tasks),
        "columns": base64.b64encode(packed).decode("ascii"),
        "revoking": [
            [task, t.revoking_since, t.revoking_at]
            for task, t in enumerate(tasks)
            if t.revoking_since is not None or t.revoking_at is not None
        ],
        "reservations": [reservation_to_dict(r) for r in assignment.reservations],
        "membership": ranges(assignment.membership),
        "nextProbeAt": assignment.next_probe_at,
        "flaps": [flap_to_dict(f) for f in assignment.flaps],
    }


def decode(data: Mapping[str, Any]) -> Assignment:
    """The assignment an intent of either format holds; ValueError (or TypeError/KeyError) if damaged."""
    if "format" not in data and isinstance(data.get("tasks"), list):
        return Assignment.from_dict(data)
    if data.get("format") != FORMAT:
        raise ValueError(f"unknown intent format {data.get('format')!r}")
    unknown = set(data) - KEYS
    if unknown:
        raise ValueError(f"intent holds unknown keys {', '.join(sorted(unknown))}")
    partitions = _count(data["partitions"])
    tasks = _tasks(str(data["columns"]), partitions, _revoking(data.get("revoking") or [], partitions))
    probe = data.get("nextProbeAt")
    return Assignment(
        generation=_count(data["generation"]),
        tasks=tasks,
        reservations=tuple(_reservation(r) for r in data.get("reservations") or ()),
        membership=parse_ranges(str(data.get("membership") or "")),
        next_probe_at=None if probe is None else float(probe),
        flaps=tuple(flap_from_dict(f) for f in data.get("flaps") or ()),
    )


def _reservation(data: Mapping[str, Any]) -> Reservation:
    """A reservation of the intent; its member id checked strictly, as every count here."""
    _count(data["member"])
    return reservation_from_dict(data)


def ranges(members: Sequence[int]) -> str:
    """Sorted distinct ids as ranges, e.g. (0, 1, 2, 5) → "0-2,5" (1,000 members → "0-999")."""
    runs: list[list[int]] = []
    for member in sorted(set(members)):
        if runs and member == runs[-1][1] + 1:
            runs[-1][1] = member
        else:
            runs.append([member, member])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def parse_ranges(text: str) -> tuple[int, ...]:
    """Inverse of `ranges`; ValueError on anything else."""
    if not _RANGES.fullmatch(text):
        raise ValueError(f"not a list of ranges: {text[:40]!r}")
    members: list[int] = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        members.extend(range(int(first), int(last or first) + 1))
    return tuple(members)


def _columns(encoded: str, partitions: int) -> list[list[str]]:
    try:
        text = zlib.decompress(base64.b64decode(encoded, validate=True)).decode("ascii")
    except (binascii.Error, zlib.error, UnicodeDecodeError) as error:
        raise ValueError(f"intent columns do not decode: {error}") from error
    if not _TEXT.fullmatch(text):
        raise ValueError("intent columns hold characters other than digits and separators")
    lines = text.split("\n")
    if len(lines) != len(COLUMNS):
        raise ValueError(f"intent holds {len(lines)} columns, not {len(COLUMNS)}")
    columns = [line.split(",") if partitions else [] for line in lines]
    for name, column in zip(COLUMNS, columns, strict=True):
        if len(column) != partitions:
            raise ValueError(f"intent column {name} holds {len(column)} tasks, not {partitions}")
    return columns


@functools.lru_cache(maxsize=16)
def _tasks(
    encoded: str, partitions: int, revoking: tuple[tuple[int, int | None, float | None], ...]
) -> tuple[TaskAssignment, ...]:
    """The tasks of the columns (cached: a reconcile that changed nothing reads the same intent again,
    and at 100,000 tasks building them costs more than the rest of reading the app)."""
    owners, epochs, standbys, warmups = _columns(encoded, partitions)
    copies: dict[str, tuple[int, ...]] = {"": ()}

    def members(cell: str) -> tuple[int, ...]:
        if cell not in copies:
            copies[cell] = tuple(int(m) for m in cell.split("+"))
        return copies[cell]

    since: list[int | None] = [None] * partitions
    at: list[float | None] = [None] * partitions
    for task, asked, stamped in revoking:
        since[task], at[task] = asked, stamped
    return tuple(
        map(
            TaskAssignment,
            [None if o == "" else int(o) for o in owners],
            map(int, epochs),
            since,
            map(members, standbys),
            map(members, warmups),
            at,
        )
    )


def _revoking(rows: Sequence[Any], partitions: int) -> tuple[tuple[int, int | None, float | None], ...]:
    found: dict[int, tuple[int, int | None, float | None]] = {}
    for task, since, at in rows:
        if not 0 <= int(task) < partitions or int(task) in found:
            raise ValueError(f"intent revokes task {task} twice or outside 0..{partitions - 1}")
        found[int(task)] = (
            int(task),
            None if since is None else int(since),
            None if at is None else float(at),
        )
    return tuple(found.values())


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value
