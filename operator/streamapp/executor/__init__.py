"""The executor data plane: per-partition PySpark micro-batches with exactly-once state and output.

Layers, bottom up: `storage` (atomic file primitives) → `layout` (paths) → `manifest` (commit records and
the pure history rules) → `changelog` / `state` / `sink` / `source` (data) → `merge` / `pipeline` (the
user's transform) → `task` (one partition in one role) → `runtime` (`Executor`, driven by a `Target`).
`replica` rebuilds a partition's committed state without Spark (copies, restores, tools); `spark` owns the
process's SparkSession; `faults` holds the crash points of fault-injection tests; `generate` and `cli`
are the command-line shells; `samples` holds example pipelines.
"""

from streamapp.executor.layout import StateLayout
from streamapp.executor.manifest import Fenced, Head, Manifest
from streamapp.executor.pipeline import Pipeline, load, transform
from streamapp.executor.replica import Replica, rebuild
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.sink import FileSink, Sink, committed_outputs
from streamapp.executor.source import FileLog, Source
from streamapp.executor.spark import SparkSettings, session
from streamapp.executor.task import Role, TaskConfig, TaskStatus

__all__ = [
    "Executor",
    "Fenced",
    "FileLog",
    "FileSink",
    "Head",
    "Manifest",
    "Pipeline",
    "Replica",
    "Role",
    "Sink",
    "Source",
    "SparkSettings",
    "StateLayout",
    "Target",
    "TaskConfig",
    "TaskStatus",
    "committed_outputs",
    "load",
    "rebuild",
    "session",
    "transform",
]
