"""A member's capacity, read from the CPU its pod asked for (functional core, no I/O).

The engine balances tasks by capacity-weighted quotas (`rebalance.quotas`): a member of capacity 2 is
given twice the tasks of a member of capacity 1. The capacity the operator gives it is the CPU request
of the member's executor container as it is on the pod that runs now, in cores (`500m` is 0.5), not
as the current spec would render it: during a rollout that raises the CPU request each new pod takes
its larger share as it comes up, and the pods not yet replaced keep theirs. A pod resized in place
counts with what the kubelet actually allocated (`status.containerStatuses[].resources`) once it says
so. Without a request (or an unreadable one) a member counts as 1 core, so an app that requests no
CPU is balanced evenly. `spec.executor.memberCapacity` overrides the pod's figure for given members
(a heterogeneous app whose pods cannot say it, e.g. nodes of different speeds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamapp.api.podtemplate import EXECUTOR_CONTAINER
from streamapp.units import cpu_cores

DEFAULT_CAPACITY = 1.0


def pod_capacity(pod: Mapping[str, Any]) -> float:
    """The capacity of a member pod: its executor container's CPU request, in cores; 1 without one."""
    requested = _requested_cpu(_container(((pod.get("status") or {}).get("containerStatuses")) or []))
    if requested is None:
        requested = _requested_cpu(_container(((pod.get("spec") or {}).get("containers")) or []))
    return requested if requested is not None else DEFAULT_CAPACITY


def member_capacity(pod_capacity: float | None, override: float | None) -> float:
    """The capacity the engine gets for a member: the override, else its pod's, else the default."""
    if override is not None:
        return override
    return pod_capacity if pod_capacity is not None else DEFAULT_CAPACITY


def _container(containers: object) -> Mapping[str, Any]:
    """The executor's entry in a list of containers (or of container statuses); empty when absent."""
    if not isinstance(containers, list):
        return {}
    found = (c for c in containers if isinstance(c, Mapping) and c.get("name") == EXECUTOR_CONTAINER)
    return next(found, {})


def _requested_cpu(container: Mapping[str, Any]) -> float | None:
    resources = container.get("resources")
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    return cpu_cores(requests.get("cpu")) if isinstance(requests, Mapping) else None
