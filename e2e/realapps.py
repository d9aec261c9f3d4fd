"""Apps whose executors run for real: PySpark processes in member pods on the process node, all data
(input log, shared state store, outputs) in one host directory the test reads back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from appbody import app_body
from localcluster.nodes import process_node_selector, process_node_tolerations
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout


def app_on_process_node(
    name: str, root: Path, partitions: int, replicas: int, **rebalance: Any
) -> dict[str, Any]:
    """A running count over `root/input`, state in `root/state`, outputs in `root/outputs`."""
    executor = {
        "image": "unused-on-the-process-node",
        "sparkConf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
        "podTemplate": {
            "spec": {
                "nodeSelector": process_node_selector(),
                "tolerations": process_node_tolerations(),
                # The executor serves /readyz on its pod IP as in every pod the operator makes:
                # a member is alive only once its Spark has started and it follows its target.
                "containers": [
                    {
                        "name": "executor",
                        "env": [
                            # Lags and positions every 2 s, not 10: the demo's live view
                            # and the tests' waits read them from the members' reports.
                            {"name": "STREAMAPP_PROGRESS_INTERVAL", "value": "2"},
                        ],
                    }
                ],
            }
        },
    }
    return app_body(
        name,
        namespace=None,
        uid=None,
        replicas=replicas,
        partitions=partitions,
        source=str(root / "input"),
        sink=str(root / "outputs"),
        state_store=f"file://{root / 'state'}",
        executor=executor,
        **({"rebalance": rebalance} if rebalance else {}),
    )


def committed_everything(state: StateLayout, log: FileLog, partitions: int) -> bool:
    """Every partition's accepted batches reach the end of its input."""
    for partition in range(partitions):
        ends = [m.end for m in accepted_manifests(state, partition)]
        if not ends or ends[-1] != log.end_offset(partition):
            return False
    return True


@contextmanager
def feeding(log: FileLog, spec: GenerateSpec) -> Iterator[None]:
    """Input appended by `spec` (a rate, no count), one segment per partition a second, on a thread of
    its own until the block ends, however it ends. A feeder that failed is raised when the block ends:
    a run whose input silently stopped would otherwise only show as executors with nothing to do."""
    stopped = threading.Event()
    failures: list[BaseException] = []

    def feed() -> None:
        try:
            generate(log, spec, tick=1.0, stopped=stopped.is_set)
        except BaseException as error:  # handed to the caller's thread below
            failures.append(error)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        yield
    finally:
        stopped.set()
        feeder.join()
        if failures:
            raise RuntimeError("the input feeder failed") from failures[0]
