"""The executor: the tasks of one process, driven by a target assignment.

The membership loop (Kubernetes side) calls, for each new generation of its StreamAppMember spec:

```python
released = executor.apply(Target(active={3: 7}, standby=frozenset({5}), warmup=frozenset({1})))
# acknowledge the generation: `released` partitions are no longer processed here
while not new_spec_arrived():
    executor.step()                      # one micro-batch per active task, a bounded tail per copy
    report(executor.status())            # role, applied seq/offset, lag, epoch, fencing per task
```

`apply` only changes roles, so it returns at once and a revoked task has already committed its last batch
(batches run inside `step`, never across an `apply`). All slow work — restoring state, fencing,
processing, tailing — happens in `step`, where status can be reported between units of work.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from streamapp.api.member import StreamAppMemberSpec
from streamapp.executor.layout import StateLayout
from streamapp.executor.localstate import LocalState
from streamapp.executor.pipeline import Pipeline
from streamapp.executor.sink import Sink
from streamapp.executor.source import Source
from streamapp.executor.spark import session
from streamapp.executor.task import Role, Task, TaskConfig, TaskContext, TaskStatus


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

    Safe to drive from two threads — say, a watch thread calling `apply` while a worker thread loops
    over `step`: a lock is held for each task's unit of work, so `apply` waits for at most the batch in
    flight and a revoked task has committed its last batch by the time `apply` returns. The lock is
    handed over fairly: a Python lock is not, and a worker that releases it only to take it again at
    once would starve `apply` and `status` for as long as there is input — no acknowledgement, no
    report, until the operator's revocation deadline replaces the pod. So the worker lets every
    waiting caller in before its next unit of work.
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
        self.tasks: dict[int, Task] = {}
        self._lock = threading.RLock()
        self._turns = threading.Condition()
        self._waiting = 0

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """The lock, for a caller the worker must let in before its next unit of work."""
        with self._turns:
            self._waiting += 1
        try:
            self._lock.acquire()
        finally:
            with self._turns:
                self._waiting -= 1
                self._turns.notify_all()
        try:
            yield
        finally:
            self._lock.release()

    def apply(self, target: Target) -> frozenset[int]:
        """Make the task set match `target`; returns the partitions released (safe to acknowledge).

        A task that leaves checkpoints its local store first, so it resumes from there if it returns;
        local state of tasks gone for long is deleted (`LocalState.prune`).
        """
        wanted = target.roles()
        with self._exclusive():
            released = released_partitions({p: t.role for p, t in self.tasks.items()}, target)
            for partition in [p for p in self.tasks if p not in wanted]:
                self.tasks.pop(partition).close()
            if self.context.local is not None:
                self.context.local.prune(set(wanted), self.context.config.local_retention_seconds)
            for partition, (role, epoch) in sorted(wanted.items()):
                if partition not in self.tasks:
                    self.tasks[partition] = Task(partition, self.context)
                self.tasks[partition].assign(role, epoch)
        return released

    def step(self) -> int:
        """One unit of work for every task, in partition order; returns the total work done."""
        done = 0
        with self._lock:
            partitions = sorted(self.tasks)
        for partition in partitions:
            with self._turns:
                self._turns.wait_for(lambda: self._waiting == 0)
            with self._lock:
                task = self.tasks.get(partition)
                done += task.step() if task is not None else 0
        return done

    def status(self) -> list[TaskStatus]:
        with self._exclusive():
            return [self.tasks[p].status() for p in sorted(self.tasks)]

    def run(self, stop: Callable[[], bool], idle_sleep: float = 0.2) -> None:
        """Step until `stop()` is true, sleeping briefly when a step found nothing to do."""
        while not stop():
            if self.step() == 0:
                time.sleep(idle_sleep)

    def run_until_idle(self) -> None:
        """Step until a step finds nothing to do: every active task has consumed the source's end."""
        while self.step() > 0:
            pass
