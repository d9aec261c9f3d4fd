"""A data plane for tests of the membership client: it records the targets it is given."""

from __future__ import annotations

from collections.abc import Sequence

from streamapp.api.member import LocalCopy, StreamAppMemberSpec, TaskReport


class RecordingPlane:
    """The `membership.DataPlane` of a test: records every target it is given and reports `rows`, or
    — with `echo` — its last target's active tasks, each processed; it restores nothing and no batch
    round hangs (subclasses change that)."""

    def __init__(self, rows: Sequence[TaskReport] = (), echo: bool = False) -> None:
        self.applied: list[StreamAppMemberSpec] = []
        self.rows = list(rows)
        self.echo = echo

    def apply(self, target: StreamAppMemberSpec) -> None:
        self.applied.append(target)

    def restore_rate(self) -> float | None:
        return None

    def local_copies(self) -> tuple[LocalCopy, ...]:
        return ()

    def batch_running_since(self) -> float | None:
        return None

    def processing(self) -> tuple[int, float] | None:
        return None

    def reports(self) -> list[TaskReport]:
        if not self.echo:
            return self.rows
        target = self.applied[-1] if self.applied else None
        return [
            TaskReport(task=t.task, role="active", epoch=t.epoch) for t in (target.active if target else ())
        ]
