"""An active task's input lag (source end − committed offset), which executors report for autoscalers.

Taking over and reporting need no Spark (only processing a batch does), so this runs without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataplane_checks import COUNTS, generated_log
from kubernetes import client
from pyspark.sql import SparkSession

from streamapp.api.member import LocalCopy, StreamAppMemberSpec, TaskReport
from streamapp.executor import pipeline as pipelines
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.sink import FileSink
from streamapp.executor.io.source import FileLog
from streamapp.executor.membership import MembershipClient
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Kind, Manifest
from streamapp.executor.task import Role, Task, TaskConfig, TaskContext


def no_spark() -> SparkSession:
    raise AssertionError("reporting input lag must not start Spark")


def task(tmp_path: Path, log: FileLog) -> Task:
    layout = StateLayout(tmp_path / "state")
    context = TaskContext(
        layout, log, FileSink(tmp_path / "out"), pipelines.load(COUNTS), no_spark, TaskConfig()
    )
    return Task(0, context)


def test_active_tasks_report_input_not_yet_committed_and_copies_none(tmp_path: Path) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=500, keys=10, seed=1)
    layout = StateLayout(tmp_path / "state")
    # An earlier owner committed offsets [0, 200) (an empty batch keeps the test free of segments).
    manifests.create(layout, 0, Manifest(seq=0, epoch=1, kind=Kind.BATCH, start=0, end=200))

    copy = task(tmp_path, log)
    copy.assign(Role.WARMUP)
    assert copy.status().input_lag is None

    owner = task(tmp_path, log)
    owner.assign(Role.ACTIVE, epoch=2)
    assert owner.status().input_lag == 300, "still taking over: the input waits all the same"
    owner.step()  # catches up and fences (a Spark batch would follow on the next step)
    assert owner.owning and owner.status().input_lag == 300
    generate(log, GenerateSpec(partitions=1, count=50, keys=10, seed=1))
    assert owner.status().input_lag == 300, "an owner's figure is as of its last step"

    owner.fenced_by = 3
    assert owner.status().input_lag is None


class RecordingApi:
    """Stands in for CustomObjectsApi: keeps the status patches the membership client sends."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> None:
        del kwargs
        self.patches.append(args[-1])


class TwoTasks:
    """A data plane with an owner that measured its input lag and a warmup that has none."""

    def apply(self, target: StreamAppMemberSpec) -> None:
        del target

    def restore_rate(self) -> float | None:
        return None

    def local_copies(self) -> tuple[LocalCopy, ...]:
        return ()

    def batch_running_since(self) -> float | None:
        return None

    def processing(self) -> tuple[int, float] | None:
        return None

    def reports(self) -> list[TaskReport]:
        return [
            TaskReport(
                task=0, role="active", epoch=2, applied_seq=5, applied_offset=200, lag=0, input_lag=300
            ),
            TaskReport(task=1, role="warmup", epoch=1, applied_seq=3, applied_offset=10, lag=4),
        ]


def test_status_reports_input_lag_only_where_measured() -> None:
    member = MembershipClient(client.ApiClient(), "ns", "counts", 0, "uid-0", TwoTasks())
    api = RecordingApi()
    member.watch.custom = api  # type: ignore[assignment]
    member.report()
    tasks = api.patches[0]["status"]["tasks"]
    assert tasks[0]["inputLag"] == 300
    assert "inputLag" not in tasks[1]
