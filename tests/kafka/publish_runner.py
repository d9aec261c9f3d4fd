"""One executor owning every partition at an epoch, Kafka in and Kafka out, run until its input is
consumed: the process `test_kafka_dataplane`'s publish-window kill test SIGKILLs with
`STREAMAPP_CRASH_AT` (a kill must end the whole process, as a node loss does, so it runs apart).

`python publish_runner.py ROOT BOOTSTRAP SOURCE_TOPIC SINK_TOPIC PARTITIONS EPOCH OWNER`
"""

from __future__ import annotations

import sys
from pathlib import Path

from streamapp.executor import pipeline as pipelines
from streamapp.executor.io.kafkaclient import KafkaEndpoint
from streamapp.executor.io.kafkasink import KafkaSink
from streamapp.executor.io.kafkasource import KafkaSource
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.task import TaskConfig

COUNTS = "streamapp.executor.samples.counts:counts"


def main(argv: list[str]) -> int:
    root, bootstrap, source_topic, sink_topic, partitions, epoch, owner = argv
    layout = StateLayout(Path(root) / "state")
    source = KafkaSource(KafkaEndpoint(bootstrap, source_topic))
    sink = KafkaSink(KafkaEndpoint(bootstrap, sink_topic), layout, "app", int(partitions), namespace="ns")
    config = TaskConfig(owner=owner, max_batch_records=400)
    executor = Executor(layout, source, sink, pipelines.load(COUNTS), config)
    executor.apply(Target(active=dict.fromkeys(range(int(partitions)), int(epoch))))
    executor.run_until_idle()
    executor.apply(Target())
    source.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
