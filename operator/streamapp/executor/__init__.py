"""The executor data plane: per-partition PySpark micro-batches with exactly-once state and output.

Layers, bottom up: `storage` (atomic file primitives) → `layout` (paths) → `manifest` (commit records and
the pure history rules) → `changelog` / `state` / `sink` / `source` (data) → `merge` / `pipeline` (the
user's transform) → `task` (one partition in one role) → `runtime` (`Executor`, driven by a `Target`).
`spark` owns the process's SparkSession; `generate` and `cli` are the command-line shells.
"""

from streamapp.executor.manifest import Fenced, Head, Manifest
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.task import Role, TaskConfig, TaskStatus

__all__ = ["Executor", "Fenced", "Head", "Manifest", "Role", "Target", "TaskConfig", "TaskStatus"]
