"""The resource model: StreamApp and StreamAppMember as dataclasses, the CRDs and RBAC derived from them.

The dataclasses are the single source of truth: `codec` validates wire dicts against them, `schema`
turns them into the CRDs' OpenAPI schemas (with the same rules in CEL), and `crd`/`manifests` write the
YAML in crds/ and manifests/.
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
from streamapp.api.rbac import executor_role_rules
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
    "executor_role_rules",
    "set_condition",
]
