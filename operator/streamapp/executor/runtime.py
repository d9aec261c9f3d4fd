"""The executor: the tasks of one process, driven by a target assignment.

The membership loop (Kubernetes side) calls, for each new generation of its StreamAppMember spec:

```python
released = executor.apply(Target(active={3: 7}, standby=frozenset({5}), warmup=frozenset({1})))
# acknowledge the generation: `released` partitions are no longer processed here
while not new_spec_arrived():
    executor.step()                      # one micro-batch per active task, a bounded tail per copy
    report(executor.status())            # role, applied seq/offset, lag, epoch, fencing per task
```

`apply` only changes roles, so it returns at once — after at most the batch in flight of a task it
revokes, which has then committed its last batch. All slow work — restoring state, fencing, processing,
tailing — happens in `step`; with `run`, restores and copies work on a thread of their own, side by side
with the active tasks' batches, and status can be reported at any moment.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from streamapp.api.member import StreamAppMemberSpec
from streamapp.executor.batches import run_round
from streamapp.executor.io.sink import Sink
from streamapp.executor.io.source import Source
from streamapp.executor.pipeline import Pipeline
from streamapp.executor.slot import Slot
from streamapp.executor.spark import session
from streamapp.executor.state import changelog
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import LocalState
from streamapp.executor.task import Role, Task, TaskConfig, TaskContext, TaskStatus

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""How an executor process (a member pod, `streamapp dataplane`) logs to stderr."""
TAKEOVER_GRACE_SECONDS = 0.3
"""How long the batch lane holds a round for a takeover under way (a caught-up copy's takes a few
hundredths of a second: the old owner's last batch to apply and a fence to write), counted from the
later of the first takeover's start and the last one's end: the copy lane takes tasks over one after
the other, so on a busy machine the last of several would otherwise miss the round."""


@dataclass(frozen=True)
class Target:
    """This member's assignment for one generation.

    `active` maps partition → owner epoch. Partitions in `revoke` or in no set at all are released; a
    partition both revoked and listed as standby is demoted and keeps its state.
    """

    active: Mapping[int, int] = field(default_factory=dict)
    standby: frozenset[int] = frozenset()
    warmup: frozenset[int] = frozenset()
    revoke: frozenset[int] = frozenset()

    @staticmethod
    def of(spec: StreamAppMemberSpec) -> Target:
        """The target a StreamAppMember spec states: its revoking tasks are released (each commits
        its last batch and stops), the rest keep the roles and epochs the operator gave them."""
        return Target(
            active=spec.active_epochs(),
            standby=frozenset(spec.standby),
            warmup=frozenset(spec.warmup),
            revoke=frozenset(spec.revoking_epochs()),
        )

    def roles(self) -> dict[int, tuple[Role, int]]:
        """Partition → (role, epoch); pure. Rejects a partition given two roles."""
        wanted: dict[int, tuple[Role, int]] = {}
        for partitions, role in ((self.standby, Role.STANDBY), (self.warmup, Role.WARMUP)):
            for partition in partitions:
                if partition in wanted:
                    raise ValueError(f"partition {partition} is both standby and warmup")
                wanted[partition] = (role, 0)
        for partition, epoch in self.active.items():
            if partition in wanted or partition in self.revoke:
                raise ValueError(
                    f"partition {partition} is active and also {wanted.get(partition, 'revoked')}"
                )
            wanted[partition] = (Role.ACTIVE, epoch)
        return wanted


def released_partitions(before: Mapping[int, Role], target: Target) -> frozenset[int]:
    """Partitions that were active here and are not active in `target`; pure."""
    return frozenset(p for p, role in before.items() if role is Role.ACTIVE and p not in target.active)


class Executor:
    """All tasks of one executor process, sharing one SparkSession (started on first use).

    Work comes in two lanes. The *batch lane* gives every due task (owning active, not fenced) one
    micro-batch per round, all in one Spark job (`batches.run_round`). The *copy lane* does everything
    else, one bounded unit per task: restores, standbys and warmups tailing, takeovers and fenced tasks.
    `step` runs one round of both on the calling thread (deterministic: tools and tests use it);
    `run` — what a member pod does — runs the copy lane on a thread of its own so a restore never holds
    up an active batch.

    `apply` and `status` can be called from any thread meanwhile. `status` waits for nothing; `apply`
    waits only for a batch in flight of a task it revokes (per-task guards: `slot`), so a revoked task
    has committed its last batch by the time `apply` returns and a restore never delays an
    acknowledgement.
    """

    def __init__(
        self,
        layout: StateLayout,
        source: Source,
        sink: Sink,
        pipeline: Pipeline,
        config: TaskConfig | None = None,
        spark: Callable[[], SparkSession] = session,
        local: LocalState | None = None,
    ) -> None:
        self.context = TaskContext(layout, source, sink, pipeline, spark, config or TaskConfig(), local)
        self.slots: dict[int, Slot] = {}
        self._slots_changing = threading.Lock()  # guards the dict only, never held across work
        self._copy_lane: threading.Thread | None = None
        self._lane_failure: Exception | None = None
        # Set when there may be new work for a lane that is idling: a new target (a takeover for the
        # copy lane), a finished takeover (a task due for the batch lane). An idle lane waits on its
        # event rather than sleeping out its poll, so a handed-over task does not wait for two polls.
        self._copies_due = threading.Event()
        self._batches_due = threading.Event()
        self._takeover_done_at = 0.0  # when the copy lane last finished a takeover (monotonic)

    @property
    def tasks(self) -> dict[int, Task]:
        """The current tasks by partition (a copy)."""
        return {partition: slot.task for partition, slot in self._slots()}

    def apply(self, target: Target) -> frozenset[int]:
        """Make the task set match `target`; returns the partitions released (safe to acknowledge).

        A task that leaves checkpoints its local store first, so it resumes from there if it returns;
        local state of tasks gone for long is deleted (`LocalState.prune`), but not of one the target
        lists as revoked: a target held back until confirmed lists there what it is about to take up
        (`membership.holding_back`).
        """
        wanted = target.roles()
        with self._slots_changing:
            released = released_partitions({p: slot.role for p, slot in self.slots.items()}, target)
            gone = [self.slots.pop(p) for p in sorted(self.slots) if p not in wanted]
            for partition in wanted:
                if partition not in self.slots:
                    self.slots[partition] = Slot(Task(partition, self.context))
            assigned = [(self.slots[p], role, epoch) for p, (role, epoch) in sorted(wanted.items())]
        for slot in gone:
            slot.retire()
        if self.context.local is not None:
            config = self.context.config
            for partition in self.context.local.prune(set(wanted) | target.revoke, config.retention.seconds):
                if config.owner:
                    changelog.delete_mark(self.context.layout, partition, config.owner)
        for slot, role, epoch in assigned:
            slot.assign(role, epoch)
        self._copies_due.set()
        self._batches_due.set()
        return released

    def idle(self, seconds: float) -> None:
        """Wait up to `seconds` for work for the batch lane (a task newly due), instead of a plain sleep."""
        self._batches_due.wait(seconds)
        self._batches_due.clear()

    def step(self) -> int:
        """One round: a batch for every due task, then (unless `run` has the copy lane on its own
        thread) one unit for every other task; returns the total work done."""
        if self._lane_failure is not None:
            raise self._lane_failure
        done = self.step_batches()
        if self._copy_lane is None:
            done += self.step_copies()
        return done

    def step_batches(self) -> int:
        """One micro-batch for every due task that no other thread holds, in one Spark job."""
        if self._copy_lane is not None:
            self._await_takeovers()
        claimed = self._claim(due=True)
        try:
            return run_round(self.context, [slot.task for slot in claimed]) if claimed else 0
        finally:
            for slot in claimed:
                slot.release()

    def _await_takeovers(self) -> None:
        """Give tasks being taken over until `TAKEOVER_GRACE_SECONDS` after the first one started or
        the last one finished, whichever is later, so that tasks handed over together ride one round:
        the round starting on the first one's wake-up would leave the others to wait a whole round
        more. A takeover that makes no progress for that long (a cold restore) holds nothing up."""
        while True:
            starts = [since for _, slot in self._slots() if (since := slot.takeover_since()) is not None]
            progress = max(min(starts, default=0.0), self._takeover_done_at)
            left = progress + TAKEOVER_GRACE_SECONDS - time.monotonic()
            if not starts or left <= 0:
                return
            self._batches_due.wait(left)
            self._batches_due.clear()

    def step_copies(self) -> int:
        """One unit for every task that is not due for a batch: restore, tail, take over."""
        return sum(self._copy_unit(slot) for slot in self._claim(due=False))

    def _copy_unit(self, slot: Slot) -> int:
        """One unit of a claimed task that is not due for a batch, releasing the claim after it; a
        task it made due (a takeover done) wakes the batch lane."""
        taking_over = slot.task.taking_over
        try:
            return slot.task.step()
        finally:
            due = slot.task.due
            slot.release()
            if due:
                if taking_over:
                    self._takeover_done_at = time.monotonic()
                self._batches_due.set()

    def status(self) -> list[TaskStatus]:
        return [slot.task.status() for _, slot in self._slots()]

    def kept_copies(self, limit: int) -> dict[int, int]:
        """Per task this executor does not run but keeps local state of, the input offset that state
        is current to; the `limit` newest (`LocalState.kept`). Empty without local state."""
        local = self.context.local
        return {} if local is None else local.kept(set(self.tasks), limit)

    def restore_rate(self) -> float | None:
        """Rows a second this executor restores at, all its copies' restores together, once enough rows
        were restored (`restores`)."""
        return self.context.restores.rate()

    def full_restore_counts(self) -> dict[str, int]:
        """Full restores by copies that had local state, by reason, since this executor started."""
        return self.context.restores.full_restore_counts()

    def run(self, stop: Callable[[], bool], idle_sleep: float = 0.2) -> None:
        """Run batches on this thread and the copy lane on another until `stop()` is true; a failure on
        the copy lane stops both and is raised here."""
        with self.copy_lane(idle_sleep):
            while not stop():
                if self.step() == 0:
                    self.idle(idle_sleep)

    @contextlib.contextmanager
    def copy_lane(self, idle_sleep: float = 0.2) -> Iterator[None]:
        """The copy lane on a thread of its own for the duration; `step` then runs only batches. What
        fails on the lane is raised by the next `step` (or on exit), so a member stops visibly instead
        of processing on while its copies and takeovers stand still."""
        stopping = threading.Event()

        def loop() -> None:
            try:
                with ThreadPoolExecutor(self.context.config.copy_workers, "copy") as pool:
                    self._copy_rounds(pool, stopping, idle_sleep)
            except Exception as error:  # handed to the batch thread
                self._lane_failure = error

        self._lane_failure = None
        self._copy_lane = threading.Thread(target=loop, name="copy-lane", daemon=True)
        self._copy_lane.start()
        try:
            yield
        finally:
            stopping.set()
            self._copies_due.set()
            self._copy_lane.join()
            self._copy_lane = None
        failure, self._lane_failure = self._lane_failure, None
        if failure is not None:
            raise failure

    def _copy_rounds(self, pool: ThreadPoolExecutor, stopping: threading.Event, idle_sleep: float) -> None:
        """Hand every claimable copy's next unit to the pool, whose workers take them side by side: a
        long restore holds one worker, and the other tasks' tails and takeovers go on with the rest."""
        running: set[Future[int]] = set()
        while not stopping.is_set():
            self._copies_due.clear()
            running |= {pool.submit(self._copy_unit, slot) for slot in self._claim(due=False)}
            if not running:
                self._copies_due.wait(idle_sleep)
                continue
            finished, running = wait(running, timeout=idle_sleep, return_when=FIRST_COMPLETED)
            if sum(future.result() for future in finished) == 0:
                self._copies_due.wait(idle_sleep)

    def run_until_idle(self) -> None:
        """Step until a step finds nothing to do: every active task has consumed the source's end, and
        the snapshots started on the way are published."""
        while self.step() > 0:
            pass
        self.context.background.wait()

    def _claim(self, due: bool) -> list[Slot]:
        """Claim every task no other thread holds whose next unit is (or, `due` False, is not) a batch.

        A task is looked at before it is claimed, so a lane never holds, even for an instant, a task
        that is the other lane's: a task that has just become due, held by the copy lane's look at it
        while the batch lane claims its round, would miss that round and stand still a whole round
        more. It is looked at again once claimed, since a pending role takes effect on the claim."""
        claimed = []
        for _, slot in self._slots():
            if slot.task.due is not due:
                continue
            if slot.claim():
                if slot.task.due is due:
                    claimed.append(slot)
                else:
                    slot.release()
        return claimed

    def _slots(self) -> list[tuple[int, Slot]]:
        with self._slots_changing:
            return sorted(self.slots.items())
