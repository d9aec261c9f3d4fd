"""`spec.executor.sparkExecutors` lets a member's ServiceAccount create pods: the operator refuses it
unless the install allows it (`--allow-spark-executors`), whatever else the install allows."""

from __future__ import annotations

from typing import Any

import pytest
from api_samples import app_model

from streamapp.api import StreamApp, ValidationError
from streamapp.controller.admission import STRICT, PodPolicy, admit


def app(**executor: Any) -> StreamApp:
    return app_model(uid=None, replicas=3, executor=executor)


def spark_app() -> StreamApp:
    return app(sparkExecutors={"instances": 2})


@pytest.mark.parametrize("policy", [STRICT, PodPolicy(allow_privileged=True)])
def test_spark_executors_are_refused_unless_the_install_allows_them(policy: PodPolicy) -> None:
    with pytest.raises(ValidationError) as raised:
        admit(spark_app(), policy)
    assert raised.value.path == "spec.executor.sparkExecutors"
    assert "--allow-spark-executors" in str(raised.value)


def test_an_install_that_allows_them_runs_them() -> None:
    admit(spark_app(), PodPolicy(allow_spark_executors=True))
    admit(app(), STRICT)
