"""The API group, metadata, and the envelope (apiVersion, kind, metadata, spec, status) of a resource."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from streamapp.api.fields import ValidationError, prop
from streamapp.api.wiremodel import Model

GROUP = "streamapp.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


@dataclass(frozen=True, kw_only=True)
class ObjectMeta(Model):
    """The metadata fields the operator reads; everything else (finalizers, managedFields, ...) is kept
    in `extra` so a body survives a round trip unchanged."""

    PATH: ClassVar[str] = "metadata"

    name: str = field(metadata=prop("Object name, unique in its namespace."))
    namespace: str | None = field(default=None, metadata=prop("Namespace of the object."))
    uid: str | None = field(
        default=None, metadata=prop("Set by the API server; ownerReferences point at it.")
    )
    generation: int | None = field(
        default=None, metadata=prop("Bumped by the API server on every spec change.")
    )
    resource_version: str | None = field(
        default=None, metadata=prop("Optimistic-concurrency token of the stored object.")
    )
    labels: dict[str, str] | None = field(default=None, metadata=prop("Labels of the object."))
    annotations: dict[str, str] | None = field(default=None, metadata=prop("Annotations of the object."))
    owner_references: tuple[dict[str, Any], ...] | None = field(
        default=None, metadata=prop("Owners whose deletion garbage-collects this object.")
    )
    extra: dict[str, Any] = field(
        default_factory=dict, metadata=prop("Metadata the models do not interpret.", rest=True)
    )


SpecT = TypeVar("SpecT", bound=Model)
StatusT = TypeVar("StatusT", bound=Model)
R = TypeVar("R", bound="Resource[Any, Any]")


@dataclass(frozen=True, kw_only=True)
class Resource(Generic[SpecT, StatusT]):
    """A custom resource of this group: envelope, spec and status.

    Subclasses name their kind and the model classes of their spec and status.
    """

    KIND: ClassVar[str]
    PLURAL: ClassVar[str]
    SINGULAR: ClassVar[str]
    SHORT_NAMES: ClassVar[tuple[str, ...]]
    SPEC: ClassVar[type[Model]]
    STATUS: ClassVar[type[Model]]

    metadata: ObjectMeta
    spec: SpecT
    status: StatusT

    @classmethod
    def from_resource(cls: type[R], body: Mapping[str, Any], *, served: bool = True) -> R:
        """The resource from a body (a kopf Body or any mapping); raises ValidationError naming the
        field. `served`: read from the API server, so fields of another version of the CRD are left out
        (`Model.from_dict`); a file is read with `served=False`, which refuses them as typos."""
        if body.get("apiVersion", API_VERSION) != API_VERSION:
            raise ValidationError("apiVersion", f"expected {API_VERSION}, got {body.get('apiVersion')!r}")
        if body.get("kind", cls.KIND) != cls.KIND:
            raise ValidationError("kind", f"expected {cls.KIND}, got {body.get('kind')!r}")
        return cls(
            metadata=ObjectMeta.from_dict(body.get("metadata") or {}, served=served),
            spec=cls.SPEC.from_dict(body.get("spec") or {}, served=served),
            status=cls.STATUS.from_dict(body.get("status") or {}, served=served),
        )

    @classmethod
    def from_dict(cls: type[R], body: Mapping[str, Any]) -> R:
        """Same as `from_resource`."""
        return cls.from_resource(body)

    def to_dict(self) -> dict[str, Any]:
        """The resource body; `status` is left out while it holds nothing but defaults."""
        body = {
            "apiVersion": API_VERSION,
            "kind": self.KIND,
            "metadata": self.metadata.to_dict(),
            "spec": self.spec.to_dict(),
        }
        status = self.status.to_dict()
        if status != self.STATUS.from_dict({}).to_dict():
            body["status"] = status
        return body
