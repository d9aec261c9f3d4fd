"""A member's capacity comes from the CPU request of the pod that runs now, or from the spec."""

from __future__ import annotations

from typing import Any

import pytest
from api_samples import app_body

from streamapp.api.streamapp import StreamApp
from streamapp.controller.capacity import pod_capacity
from streamapp.controller.observe import member_views
from streamapp.rebalance import AppConfig, Assignment, RebalanceConfig, plan
from streamapp.units import cpu_cores


@pytest.mark.parametrize(
    ("quantity", "cores"),
    [
        ("2", 2.0),
        ("500m", 0.5),
        ("1500m", 1.5),
        ("1.5", 1.5),
        (".25", 0.25),
        ("250000u", 0.25),
        ("5e-1", 0.5),
        ("1k", 1000.0),
        (3, 3.0),
    ],
)
def test_cpu_quantities_read_as_cores(quantity: object, cores: float) -> None:
    assert cpu_cores(quantity) == pytest.approx(cores)


@pytest.mark.parametrize("quantity", ["0", "0m", "-1", "1e3m", "two", "2 cores", "", None, [], "1e999999"])
def test_what_is_no_positive_quantity_reads_as_none(quantity: object) -> None:
    assert cpu_cores(quantity) is None


def pod(member: int, cpu: str | None = None, *, allocated: str | None = None) -> dict[str, Any]:
    """A ready member pod whose executor container requests `cpu` (and, resized in place, has
    `allocated`), next to a sidecar requesting more, which must not count."""
    executor: dict[str, Any] = {"name": "executor"}
    if cpu is not None:
        executor["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True"}]}
    if allocated is not None:
        status["containerStatuses"] = [{"name": "executor", "resources": {"requests": {"cpu": allocated}}}]
    return {
        "metadata": {
            "name": f"counts-{member}",
            "uid": f"u{member}",
            "labels": {"streamapp.dev/member": str(member)},
        },
        "spec": {"containers": [{"name": "sidecar", "resources": {"requests": {"cpu": "8"}}}, executor]},
        "status": status,
    }


def test_a_pod_counts_with_its_executor_containers_cpu_request() -> None:
    assert pod_capacity(pod(0, "2")) == 2.0
    assert pod_capacity(pod(0, "500m")) == 0.5


def test_a_pod_without_a_request_counts_as_one_core() -> None:
    assert pod_capacity(pod(0)) == 1.0
    assert pod_capacity({"metadata": {}}) == 1.0
    assert pod_capacity(pod(0, "0")) == 1.0


def test_a_pod_resized_in_place_counts_with_what_the_kubelet_allocated() -> None:
    assert pod_capacity(pod(0, "4", allocated="2")) == 2.0


def test_views_carry_each_pods_capacity_unless_the_spec_overrides_it() -> None:
    pods = [pod(0, "1"), pod(1, "2"), pod(2)]
    views = {v.id: v.capacity for v in member_views(pods, [], {}, wanted=4)}
    assert views == {0: 1.0, 1: 2.0, 2: 1.0, 3: 1.0}
    overridden = {v.id: v.capacity for v in member_views(pods, [], {}, wanted=3, capacities={1: 0.5, 2: 3.0})}
    assert overridden == {0: 1.0, 1: 0.5, 2: 3.0}


def test_a_rollout_that_raises_cpu_gives_each_new_pod_its_share_as_it_comes_up() -> None:
    """Member 0's pod was replaced by one requesting twice the CPU; member 1's not yet."""
    config = AppConfig(partitions=12, replicas=2, rebalance=RebalanceConfig(max_warmup_replicas=12))
    views = member_views([pod(0, "2"), pod(1, "1")], [], {}, wanted=2)
    result = plan(config, views, Assignment(), now=0)
    owned = [sum(1 for t in result.assignment.tasks if t.active == m) for m in (0, 1)]
    assert owned == [8, 4]


def test_member_capacity_in_the_spec_reads_as_cores() -> None:
    capacity = [{"member": 2, "cpu": "2"}, {"member": 0, "cpu": "250m"}]
    body = app_body(partitions=12, executor={"memberCapacity": capacity})
    assert StreamApp.from_resource(body).spec.executor.capacity_overrides() == {2: 2.0, 0: 0.25}
