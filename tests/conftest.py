"""Fixtures shared by every test tier."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# What `make test` builds or installs before the tests that use it: a test that asks for one of these
# fixtures (or for the S3 store through a ``stores`` parameter) or carries one of these markers is marked
# ``built``; make test runs the others while it builds (Makefile: test).
BUILT_FIXTURES = frozenset(
    {"helm", "promtool", "prometheus", "keda", "s3_server", "image", "kafka_bootstrap", "local_cluster"}
)
BUILT_MARKERS = ("integration", "image", "kafka", "node", "demo", "long")
# What make test builds last, at low priority, while the first built tests run: the tests that need it
# run last, so they find it ready (or wait for it on its build lock) without holding up the others.
LATE_FIXTURES = frozenset({"helm", "promtool", "prometheus", "keda", "s3_server", "image"})


def _fixtures(item: pytest.Item) -> set[str]:
    """The fixtures a test uses, counting the S3 server a ``stores="s3"`` parameter asks for."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("stores") == "s3":
        names.add("s3_server")
    return names


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``built`` every test that needs something make test builds first, and move the tests that
    need one of the late builds to the end (a stable sort: the order is otherwise kept). Runs before
    ``-m`` deselects (pytest's own hook comes last) and after the deeper conftests' hooks (called
    first), so the ``integration`` marker that tests/integration adds is seen."""
    for item in items:
        if _fixtures(item) & BUILT_FIXTURES or any(item.get_closest_marker(name) for name in BUILT_MARKERS):
            item.add_marker(pytest.mark.built)
    items.sort(key=lambda item: bool(_fixtures(item) & LATE_FIXTURES))


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


def under_ci() -> bool:
    """``CI`` set: a missing tool fails a test instead of skipping it (the suite installs it there)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """What a test does when this host lacks something it needs: skip on a developer machine, fail
    under ``CI``, where a silent skip would hide a broken build."""
    if under_ci():
        pytest.fail(f"CI is set but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def image() -> str:
    """The current ``streamapp:<version>`` image, built if its inputs changed (podman's build) — or
    ``$STREAMAPP_IMAGE``, one built and loaded elsewhere (``e2e/kind/node-tests.sh`` builds with docker)."""
    from imagebuild import build, podman

    prebuilt = os.environ.get("STREAMAPP_IMAGE")
    if prebuilt:
        return prebuilt
    try:
        podman.binary()
        result = build.ensure_image()
    except podman.ToolMissing as missing:
        unavailable(str(missing))
    return result.reference


@pytest.fixture(scope="session")
def host_unavailable() -> Callable[[str], NoReturn]:
    """:func:`unavailable`, for tests in other directories (conftest modules are not importable)."""
    return unavailable


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The pinned helm (built from Go modules once, cached), with its own config and cache dirs."""
    from helmtool import build as helmbuild

    helmbuild.ensure_built()
    home = tmp_path_factory.mktemp("helm-home")
    return [
        "env",
        f"HELM_CACHE_HOME={home / 'cache'}",
        f"HELM_CONFIG_HOME={home / 'config'}",
        f"HELM_DATA_HOME={home / 'data'}",
        str(helmbuild.helm_path()),
    ]
