"""Where the operator's requests queue in the API server (API Priority and Fairness).

Every member's executor runs as a ServiceAccount of its own, and the API server's default FlowSchema
for service accounts puts all of them, and the operator, at one priority level with one flow per
ServiceAccount. Under load the API server serves those flows fairly: the operator, one flow among
every member with requests queued, gets one share of the level's seats while its writes — a
rebalance step's member targets, the app's status — are what the members are waiting for. The chart therefore ships a
FlowSchema that matches the operator's ServiceAccount before the default one and sends its requests
to a level of their own choosing (the built-in `workload-high`, which the controller manager's
controllers use, unless the values say otherwise). A FlowSchema naming a level that does not exist is
marked dangling by the API server and matches nothing: the requests fall back to the defaults.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "flowcontrol.apiserver.k8s.io/v1"
PRIORITY_LEVEL = "workload-high"
# Evaluated lowest first: below the built-in `service-accounts` (9000), which would otherwise match,
# and above the built-in schemas of the control plane's own components (up to 900).
MATCHING_PRECEDENCE = 1000
SERVICE_ACCOUNTS_PRECEDENCE = 9000
# Everything the operator asks: its watches, its writes, namespaced and cluster-scoped.
RESOURCE_RULES: list[dict[str, Any]] = [
    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": True}
]
