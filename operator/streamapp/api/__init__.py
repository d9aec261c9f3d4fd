"""The resource model: StreamApp and StreamAppMember as dataclasses, and nothing rendered from them.

The dataclasses are the single source of truth: `codec` validates wire dicts against them and `schema`
states them as OpenAPI schemas (with the same rules in CEL). What is written from them (the CRDs,
RBAC, manifests, the chart) lives in `streamapp.render`, which this package never imports.
"""

from streamapp.api.conditions import Condition, ConditionType, set_condition
from streamapp.api.fields import ValidationError
from streamapp.api.member import (
    ActiveTask,
    RevokingTask,
    StreamAppMember,
    StreamAppMemberSpec,
    StreamAppMemberStatus,
    TaskReport,
)
from streamapp.api.meta import API_VERSION, GROUP, VERSION, ObjectMeta, Resource
from streamapp.api.streamapp import (
    Endpoint,
    Executor,
    LastRebalance,
    MemberSummary,
    Pipeline,
    StateStore,
    Storage,
    StreamApp,
    StreamAppSpec,
    StreamAppStatus,
    TaskCounts,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "ActiveTask",
    "Condition",
    "ConditionType",
    "Endpoint",
    "Executor",
    "LastRebalance",
    "MemberSummary",
    "ObjectMeta",
    "Pipeline",
    "Resource",
    "RevokingTask",
    "StateStore",
    "Storage",
    "StreamApp",
    "StreamAppMember",
    "StreamAppMemberSpec",
    "StreamAppMemberStatus",
    "StreamAppSpec",
    "StreamAppStatus",
    "TaskCounts",
    "TaskReport",
    "ValidationError",
    "set_condition",
]
