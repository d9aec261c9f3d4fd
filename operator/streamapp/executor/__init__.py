"""The executor data plane: per-partition PySpark micro-batches with exactly-once state and output.

Three parts, data flowing down:

* the process: `agent` (the member pod's loop), `membership` (following the StreamAppMember),
  `runtime` (`Executor`, driven by a `Target`), `batches` / `slot` (the lanes rounds run on), `drain`,
  `spark` (the process's SparkSession), `faults` (crash points of fault-injection tests), `cli`;
* a partition's work: `task` (one partition in one role), `pipeline` / `merge` (the user's transform
  and how its result folds into state), `samples` (example pipelines);
* `io` (sources, sinks, the publisher, the generator) and `state` (stores, changelog, manifests,
  snapshots, replicas, the shared blob stores). `state` knows nothing of Kafka or Spark.
"""

from streamapp.executor.io.sink import FileSink, Sink, committed_outputs
from streamapp.executor.io.source import FileLog, Source
from streamapp.executor.pipeline import Pipeline, load, transform
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.spark import SparkSettings, session
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Fenced, Head, Manifest
from streamapp.executor.state.replica import Replica, rebuild
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
