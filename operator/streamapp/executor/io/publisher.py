"""Sinks that publish committed batches somewhere readers do not go through manifests (e.g. Kafka).

A `Sink` makes outputs exactly-once by having readers follow manifests. A reader of a Kafka topic
cannot, so such a sink also is a `Publisher`: the owning task calls `publish` with its head after
taking over and after each commit, and the publisher makes every committed batch up to that head
visible exactly once, resuming from what it already published. Raising `manifest.Conflict` from
`publish` tells the task to catch up and retry (e.g. another owner fenced this publisher: if that owner
holds a higher epoch, the catch-up shows it and the task stops).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from streamapp.executor.state.manifest import Head


@runtime_checkable
class Publisher(Protocol):
    def publish(self, partition: int, epoch: int, head: Head) -> int:
        """Publish every committed batch of `partition` up to `head` not published yet, as owner
        `epoch`; returns the batches published by this call."""
        ...
