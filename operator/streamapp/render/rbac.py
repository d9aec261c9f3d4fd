"""Who may do what, as rendered: the operator's rules (declared in `controller.permissions`), checks
over rule sets, and the rights users gain on StreamApps through the built-in roles.
"""

from __future__ import annotations

from collections.abc import Iterable

from streamapp.api.member import StreamAppMember
from streamapp.api.meta import GROUP
from streamapp.api.streamapp import StreamApp
from streamapp.controller.permissions import READ, Rule, rule


def covers(rules: Iterable[Rule], wanted: Rule) -> bool:
    """True when `rules` grant every (group, resource, verb) of `wanted` to every name (rules with
    resourceNames are ignored: they cover less than `wanted` may ask)."""
    granted = {
        (group, resource, verb)
        for rule in rules
        if not rule.get("resourceNames")
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    return all(
        (group, resource, verb) in granted
        for group in wanted["apiGroups"]
        for resource in wanted["resources"]
        for verb in wanted["verbs"]
    )


def user_roles() -> dict[str, list[Rule]]:
    """What the built-in `view`, `edit` and `admin` roles gain on StreamApps (by aggregation, from the
    chart): viewers read apps and members; editors and admins also create, change, delete and scale apps.
    Members stay the operator's to write: a person changing one would fight the operator."""
    read = rule(GROUP, [StreamApp.PLURAL, f"{StreamApp.PLURAL}/status", StreamAppMember.PLURAL], READ)
    write = rule(
        GROUP, [StreamApp.PLURAL, f"{StreamApp.PLURAL}/scale"], ["create", "update", "patch", "delete"]
    )
    return {"view": [read], "edit": [read, write], "admin": [read, write]}
