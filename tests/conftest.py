"""Fixtures shared by every test tier."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for the whole test session, started only if a test asks for it.

    It is the executor's own process-wide session (`streamapp.executor.spark.session`), so code under
    test that calls `session()` gets this one too.
    """
    from streamapp.executor.spark import session

    started = session()
    yield started
    started.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """A real Kafka broker (KRaft, e2e/kafkabroker) for the session: its bootstrap address.

    Reuses one that `python -m kafkabroker up` left running under the cluster directory; one it
    started is stopped at the end (`make cluster-down` stops a leftover one too).
    """
    from kafkabroker.broker import KafkaBroker

    broker = KafkaBroker()
    started_here = not broker.is_running()
    bootstrap = broker.up()
    yield bootstrap
    if started_here:
        broker.down()
