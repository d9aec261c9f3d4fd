"""`spec.executor.podTemplate` on the wire: the parts of a Pod template the API server must check.

The operator builds each member pod from this template (`controller.children.pod`), so a template the
operator cannot use — `containers: "x"`, a container without a name, a second volume named `state`, an
env entry without a name, a volume mount without a mountPath, a grace period that is not a number —
must be refused when the StreamApp is written, not when every reconcile fails on it later. The template stays a
plain dict for the operator; the models here only declare the fields a rule needs (everything else in a
container, a volume or the pod spec is kept as it is and checked by the API server at pod creation).

What the template may not do at all is choose the executors' identity: the operator runs each as its
member's own ServiceAccount, so a StreamApp's creator cannot borrow the rights of another
account through the operator (a confused deputy). Privilege requests that an install may allow
(privileged containers, host namespaces, hostPath volumes, ...) are refused by the operator instead
(`controller.admission`), because a CRD's rules cannot be relaxed per install.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from streamapp.api.fields import Rule, ValidationError, prop
from streamapp.api.schema import model_schema
from streamapp.api.wiremodel import Model

DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_LABEL_MAX = 63
EXECUTOR_CONTAINER = "executor"
# Volumes every member pod gets from the operator: its local state and Spark's scratch space.
OPERATOR_VOLUMES = ("state", "scratch")
MAX_CONTAINERS = 16
MAX_VOLUMES = 64
MAX_ENV = 256
MAX_GRACE_SECONDS = 86_400
IMAGE_MAX_LENGTH = 1024
# Kubernetes names an ephemeral volume's claim `<pod>-<volume>`, and member pods are `<app>-<id>`: a
# volume name holding a number followed by '-' (`1-x`, `a-1-x`), or ending in `state-<number>`, gives a
# claim name another app of the namespace derives too (app `b`'s `state-1` is app `b-0`'s state claim
# of member 1; app `a`'s `1-x` is app `a-1`'s ephemeral `x`). Without them every derived claim name
# parses back to one app (tests/controller/test_child_names.py).
COLLIDING_EPHEMERAL_VOLUME = "(^|-)[0-9]+-|(^|-)state-[0-9]+$"
IDENTITY_MESSAGE = (
    "the operator runs each executor as its member's own ServiceAccount; the pod template cannot choose "
    "another identity"
)


def _name(what: str) -> dict[str, Any]:
    return prop(
        f"Name of the {what}, unique in the pod.",
        pattern=DNS_LABEL_PATTERN,
        pattern_message=f"{what} name must be a DNS-1123 label (lowercase letters, digits and '-')",
        max_length=DNS_LABEL_MAX,
    )


@dataclass(frozen=True, kw_only=True)
class EnvVarTemplate(Model):
    """An environment variable of a template container: merged with the operator's by name."""

    name: str = field(metadata=prop("Name of the variable.", max_length=4096))
    rest: dict[str, Any] = field(
        default_factory=dict, metadata=prop("Its value or valueFrom, as in a Pod.", rest=True)
    )


@dataclass(frozen=True, kw_only=True)
class VolumeMountTemplate(Model):
    """A volume mount of a template container: merged with the operator's by mount path."""

    name: str = field(metadata=prop("The volume mounted.", max_length=DNS_LABEL_MAX))
    mount_path: str = field(metadata=prop("Where it is mounted in the container.", max_length=4096))
    rest: dict[str, Any] = field(
        default_factory=dict, metadata=prop("Every other VolumeMount field, as in a Pod.", rest=True)
    )


@dataclass(frozen=True, kw_only=True)
class ContainerTemplate(Model):
    """A container of the template: one named `executor` refines the operator's executor container (its
    image comes from executor.image), any other is a sidecar and needs its own image."""

    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            f"self.name == '{EXECUTOR_CONTAINER}' || has(self.image)",
            f"a container other than {EXECUTOR_CONTAINER} needs image",
            lambda c: c.name == EXECUTOR_CONTAINER or c.image is not None,
            ".image",
        ),
    )

    name: str = field(metadata=_name("container"))
    image: str | None = field(
        default=None,
        metadata=prop(
            "Container image.",
            rules=(Rule("size(self) > 0", "image must not be empty", lambda i: len(i) > 0),),
            max_length=IMAGE_MAX_LENGTH,
        ),
    )
    env: tuple[EnvVarTemplate, ...] = field(
        default=(), metadata=prop("Environment variables, each with a name.", max_items=MAX_ENV)
    )
    volume_mounts: tuple[VolumeMountTemplate, ...] = field(
        default=(), metadata=prop("Volume mounts, each with a name and a mountPath.", max_items=MAX_VOLUMES)
    )
    rest: dict[str, Any] = field(
        default_factory=dict, metadata=prop("Every other Container field, as in a Pod.", rest=True)
    )


@dataclass(frozen=True, kw_only=True)
class InitContainerTemplate(ContainerTemplate):
    """An init container of the template: it runs before the executor and needs its own image."""

    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule("has(self.image)", "an init container needs image", lambda c: c.image is not None, ".image"),
    )


@dataclass(frozen=True, kw_only=True)
class VolumeTemplate(Model):
    """A volume of the template; the operator's own volumes (state, scratch) are added to these."""

    name: str = field(
        metadata=prop(
            "Name of the volume, unique in the pod; state and scratch are the operator's.",
            pattern=DNS_LABEL_PATTERN,
            pattern_message="volume name must be a DNS-1123 label (lowercase letters, digits and '-')",
            max_length=DNS_LABEL_MAX,
            rules=(
                Rule(
                    f"!(self in {list(OPERATOR_VOLUMES)})",
                    f"volume names {' and '.join(OPERATOR_VOLUMES)} are the operator's own; choose another",
                    lambda n: n not in OPERATOR_VOLUMES,
                ),
            ),
        )
    )
    ephemeral: dict[str, Any] | None = field(
        default=None,
        metadata=prop(
            "A generic ephemeral volume, as in a Pod: its claim is named <pod>-<volume>, so the name "
            "may not contain a number followed by '-' nor end in state-<number>."
        ),
    )
    rest: dict[str, Any] = field(
        default_factory=dict, metadata=prop("The volume's source, as in a Pod.", rest=True)
    )

    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            f"!has(self.ephemeral) || !self.name.matches('{COLLIDING_EPHEMERAL_VOLUME}')",
            "an ephemeral volume's claim is named <pod>-<volume> and member pods <app>-<id>: a volume "
            "name with a number followed by '-' (1-x, a-1-x) or ending in state-<number> makes a claim "
            "name another app's claim may have; choose another",
            lambda v: v.ephemeral is None or re.search(COLLIDING_EPHEMERAL_VOLUME, v.name) is None,
            ".name",
        ),
    )


def _no(key: str, check: Any) -> Rule:
    return Rule(f"!has(self.{key})", IDENTITY_MESSAGE, check, f".{key}")


@dataclass(frozen=True, kw_only=True)
class PodSpecTemplate(Model):
    """The pod spec part of the template (PodSpec fields: affinity, tolerations, sidecars, volumes, ...)."""

    RULES: ClassVar[tuple[Rule, ...]] = (
        _no("serviceAccountName", lambda s: s.service_account_name is None),
        _no("serviceAccount", lambda s: s.service_account is None),
        _no("automountServiceAccountToken", lambda s: s.automount_service_account_token is None),
    )

    containers: tuple[ContainerTemplate, ...] = field(
        default=(),
        metadata=prop(
            "Sidecars, and a container named executor that refines the operator's.",
            list_map_keys=("name",),
            max_items=MAX_CONTAINERS,
        ),
    )
    init_containers: tuple[InitContainerTemplate, ...] = field(
        default=(),
        metadata=prop("Init containers.", list_map_keys=("name",), max_items=MAX_CONTAINERS),
    )
    volumes: tuple[VolumeTemplate, ...] = field(
        default=(),
        metadata=prop(
            "Volumes beside the operator's state and scratch volumes.",
            list_map_keys=("name",),
            max_items=MAX_VOLUMES,
        ),
    )
    service_account_name: str | None = field(
        default=None,
        metadata=prop("Not allowed: the operator sets the member's own account.", max_length=253),
    )
    service_account: str | None = field(
        default=None,
        metadata=prop("Not allowed: the operator sets the member's own account.", max_length=253),
    )
    automount_service_account_token: bool | None = field(
        default=None, metadata=prop("Not allowed: executors need their token to follow their member.")
    )
    termination_grace_period_seconds: int | None = field(
        default=None,
        metadata=prop(
            "Seconds a deleted member pod has to hand its tasks over and stop (overrides "
            "executor.terminationGracePeriodSeconds).",
            minimum=0,
            maximum=MAX_GRACE_SECONDS,
        ),
    )
    rest: dict[str, Any] = field(
        default_factory=dict, metadata=prop("Every other PodSpec field, as in a Pod.", rest=True)
    )


@dataclass(frozen=True, kw_only=True)
class PodTemplate(Model):
    """Pod template merged under the operator's pod (labels, tolerations, affinity, sidecars)."""

    metadata: dict[str, Any] | None = field(
        default=None,
        metadata=prop(
            "Labels and annotations added to every member pod; the operator's own keys "
            "(streamapp.dev/..., app.kubernetes.io/managed-by) are refused."
        ),
    )
    spec: PodSpecTemplate | None = field(default=None, metadata=prop("PodSpec fields of every member pod."))


def without_nulls(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of the template with every null field (and null list entry) left out.

    The API server keeps nulls in the template's undeclared fields (it preserves unknown fields as they
    are; tests/integration/test_null_fields.py posts them raw), and a null merged over the
    operator's defaults would drop them: `runAsNonRoot: null`, `seccompProfile: null` or a sidecar's
    `allowPrivilegeEscalation: null` would replace `true`, RuntimeDefault and `false`, and a check
    that looks for `false` would let them through. A null means absent in a Pod (its fields are
    optional pointers), so it means absent here too, once, where the template is parsed: the
    operator's checks (`controller.admission`, `controller.claims`) and its pod (`controller.children`)
    all read this copy, and the admission policies treat null as absent in CEL alike.
    """
    return cast(dict[str, Any], _without_nulls(value))


def _without_nulls(value: object) -> object:
    if isinstance(value, Mapping):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value if item is not None]
    return copy.deepcopy(value)


class PodTemplateCodec:
    """The `podTemplate` field: checked against `PodTemplate`, kept as the dict the user wrote (the
    operator merges it into its pod as it is)."""

    def schema(self) -> dict[str, Any]:
        """The template's schema, with the rules above in CEL."""
        return model_schema(PodTemplate)

    def decode(self, value: object, path: str) -> dict[str, Any]:
        """The template as written, nulls dropped (`without_nulls`), once it passes the same rules the
        API server runs."""
        if not isinstance(value, Mapping):
            raise ValidationError(path, f"expected an object, got {value!r}")
        template = without_nulls(value)
        PodTemplate.from_dict(template, path)
        return template

    def encode(self, value: Any) -> Any:
        """The template as it is."""
        return value


POD_TEMPLATE = PodTemplateCodec()
