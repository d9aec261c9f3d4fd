"""The base of every model: `from_dict`/`to_dict` through the shared codec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from streamapp.api.codec import decode, encode, tolerating_unknown

M = TypeVar("M", bound="Model")


class Model:
    """A dataclass model of (part of) a resource; `PATH` names it in error messages, e.g. `spec`."""

    PATH: ClassVar[str] = ""

    @classmethod
    def from_dict(
        cls: type[M], data: Mapping[str, Any], path: str | None = None, *, served: bool = False
    ) -> M:
        """Decode and validate camelCase wire data, filling in defaults; `served`: the data was read
        from the API server, whose schema refused typos already, so unknown keys (another CRD
        version's fields) are left out rather than refused (`codec.tolerating_unknown`)."""
        if not served:
            return decode(cls, data, cls.PATH if path is None else path)
        with tolerating_unknown():
            return decode(cls, data, cls.PATH if path is None else path)

    def to_dict(self) -> dict[str, Any]:
        """The camelCase wire form, with defaults spelled out and unset optional fields left out."""
        wire: dict[str, Any] = encode(self)
        return wire
