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
