"""Fixtures shared by every test tier."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

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
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The real S3 test server (e2e/s3server), started once per session when a test asks for it."""
    from s3server import server

    state_dir = tmp_path_factory.mktemp("s3server")
    started = server.start(state_dir)
    try:
        yield started
    finally:
        server.stop(state_dir)


@pytest.fixture
def s3_uri(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """`s3://<fresh bucket>/app` on the test server, with the AWS variables set for in-process clients."""
    from streamapp.executor.state import s3store

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    bucket = f"t-{uuid.uuid4().hex[:20]}"
    s3store.client_from_env().create_bucket(Bucket=bucket)
    return f"s3://{bucket}/app"


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
