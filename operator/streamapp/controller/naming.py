"""The names and labels of an app's objects now live in `streamapp.api.names` (the executor needs them
too, and it must not import the controller). Re-exported here only for work in flight that still
imports this module; import `streamapp.api.names` instead.
"""

from __future__ import annotations

from streamapp.api.names import (
    APP_LABEL,
    APPS,
    GROUP,
    MANAGED_BY,
    MEMBER_LABEL,
    MEMBERS,
    VERSION,
    executor_account,
    member_labels,
    member_name,
    selector,
    state_claim_name,
)

__all__ = [
    "APPS",
    "APP_LABEL",
    "GROUP",
    "MANAGED_BY",
    "MEMBERS",
    "MEMBER_LABEL",
    "VERSION",
    "executor_account",
    "member_labels",
    "member_name",
    "selector",
    "state_claim_name",
]
