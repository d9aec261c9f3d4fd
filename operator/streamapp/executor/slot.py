"""A task's place in the executor: who may step it now, and the role it is to take next.

Tasks run side by side — active batches on one thread, restores and copies on another — so each task
needs its own guard instead of one executor-wide lock:

* A worker *claims* a task for one unit of work without waiting: a task busy elsewhere (say, a warmup
  in the middle of a long restore) is simply skipped this round, so no worker ever waits for another's
  unit, and no task is ever stepped by two threads at once.
* `assign` never waits for a restore or a tail. A new role is recorded and takes effect at the start of
  the task's next unit, when it is not in one, or at once when it is idle. It waits only when the task
  may be in the middle of a batch it owns — so a revoked active has committed its last batch when
  `assign` returns — and then only for that batch: once the unit ends the new role is in effect, and a
  task that is no longer active is never given another batch.

Reading a task's progress (`Executor.status`) takes no guard at all: the task's fields are replaced
whole, never edited in place, so a report sees a consistent value of each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from streamapp.executor.task import Role, Task


class Slot:
    """One task and its guard (see the module docstring)."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self._changed = threading.Condition()
        self._busy = False
        self._retired = False
        self._pending: tuple[Role, int] | None = None
        self._pending_since = 0.0

    @property
    def role(self) -> Role:
        """The role the task has been given (in effect, or taking effect at its next unit)."""
        pending = self._pending
        return pending[0] if pending is not None else self.task.role

    def assign(self, role: Role, epoch: int) -> None:
        """Give the task a new role; waits only for a batch the task may have in flight."""
        with self._changed:
            if self._retired or (self._pending is None and (role, epoch) == self._in_effect()):
                return
            self._pending, self._pending_since = (role, epoch), time.monotonic()
            self._wait_for_batch(lambda: not self._busy or self._pending is None)
            if not self._busy:
                self._take_pending()

    def takeover_since(self) -> float | None:
        """When the task was made active, while its takeover has yet to finish (its new role may still
        be pending, to be taken at its next unit) or the copy lane that finished it still holds the
        task; None otherwise.

        The last case: a takeover done, the task due, but its unit not yet released. The batch lane's
        claim skips a held task, so a round started in that instant left it out, and it waited a whole
        round more (a loaded CI run saw tasks handed over together ride two rounds)."""
        pending, since = self._pending, self._pending_since
        if pending is not None and pending[0] is Role.ACTIVE:
            return since
        task = self.task
        held_after_takeover = self._busy and task.due
        return task.activated_at if task.taking_over or held_after_takeover else None

    def retire(self) -> None:
        """Drop the task: no unit starts after this, and a batch in flight has committed on return.
        The task closes (checkpoints its local store) now if it is idle, else when its unit ends."""
        with self._changed:
            self._retired = True
            self._pending = None
            self._wait_for_batch(lambda: not self._busy)
            if not self._busy:
                self.task.close()

    def claim(self) -> bool:
        """Start a unit of work on this thread, if no other holds the task; the caller must `release`."""
        with self._changed:
            if self._busy or self._retired:
                return False
            self._busy = True
            self._take_pending()
            return True

    def release(self) -> None:
        with self._changed:
            self._busy = False
            if self._retired:
                self.task.close()
            self._changed.notify_all()

    def _in_effect(self) -> tuple[Role, int]:
        return self.task.role, self.task.epoch

    def _wait_for_batch(self, done: Callable[[], bool]) -> None:
        """Wait until `done` if the task is in a unit and may be in a batch: it owns its partition. A
        task not owning when asked cannot start a batch before its next unit, which takes the new role
        (or, retired, never starts)."""
        if self._busy and self.task.owning:
            self._changed.wait_for(done)

    def _take_pending(self) -> None:
        if self._pending is not None:
            self.task.assign(*self._pending)
            self._pending = None
