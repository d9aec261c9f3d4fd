"""Field metadata shared by the Python models and the generated OpenAPI schema.

Every constraint of the resource model is declared once, on the dataclass field it constrains, and both
the Python-side validation (`codec`) and the CRD schema (`schema`) are derived from that declaration.
A rule the API server checks in CEL carries its Python twin next to it, so the two cannot be edited
apart without the tests noticing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class ValidationError(ValueError):
    """A resource does not match its model; the message starts with the offending field's path."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True)
class Rule:
    """A CEL rule for the API server and, when it can be checked without the old object, its Python twin.

    `field_path` points the API server's error at a child field (as in `x-kubernetes-validations`); the
    Python error uses the same path. Transition rules (`oldSelf`) have no Python twin. A message that
    names the offending value is `message_expression` (CEL) with its Python twin `explain`; `message`
    stays the fallback the API server uses when the expression fails.
    """

    cel: str
    message: str
    check: Callable[[Any], bool] | None = None
    field_path: str = ""
    message_expression: str = ""
    explain: Callable[[Any], str] | None = None

    def to_schema(self) -> dict[str, str]:
        """The `x-kubernetes-validations` entry."""
        entry = {"rule": self.cel, "message": self.message}
        if self.message_expression:
            entry["messageExpression"] = self.message_expression
        if self.field_path:
            entry["fieldPath"] = self.field_path
        return entry


class Codec(Protocol):
    """A field whose wire form is not derived from its Python type (e.g. a model owned by another package)."""

    def schema(self) -> dict[str, Any]:
        """The field's OpenAPI v3 schema."""
        ...

    def decode(self, value: object, path: str) -> Any:
        """The Python value of a wire value; raises ValidationError naming `path`."""
        ...

    def encode(self, value: Any) -> Any:
        """The wire value of a Python value."""
        ...


@dataclass(frozen=True)
class Prop:
    """What a field means on the wire beyond its Python type.

    `minimum` and `maximum` become the schema's own bounds (what `kubectl explain`, kubeconform and
    editors read; the API server's message names the field and the bound) and the operator's checks;
    `pattern` becomes a CEL rule whose message names the field (the API server's own message for a
    pattern does not say what a valid value looks like); `max_length`/`max_items` bound the cost of CEL
    rules. `rest` marks the field that keeps unknown keys of an open object (the schema then
    preserves unknown fields). `list_map_keys` names the fields that tell a list's entries apart: they
    are checked unique when decoded, and the list becomes a map keyed by them, so server-side apply
    merges its entries instead of replacing the list — unless `atomic`: a list one writer always
    replaces whole stays one field for the API server's field tracking, whose managedFields otherwise
    hold an entry per item (most of a member's object: bench/results/apiscale.md).
    """

    description: str
    wire: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    pattern: str | None = None
    pattern_message: str = ""
    max_length: int | None = None
    max_items: int | None = None
    format: str | None = None
    rules: tuple[Rule, ...] = ()
    rest: bool = False
    list_map_keys: tuple[str, ...] = ()
    atomic: bool = False
    codec: Codec | None = None

    def all_rules(self, wire: str) -> tuple[Rule, ...]:
        """What the operator checks: declared rules plus those implied by `minimum`, `maximum` and
        `pattern`."""
        implied: list[Rule] = []
        if self.minimum is not None:
            low = self.minimum
            implied.append(
                Rule(f"self >= {low}", f"{wire} must be >= {low}", lambda value: bool(value >= low))
            )
        if self.maximum is not None:
            high = self.maximum
            implied.append(
                Rule(f"self <= {high}", f"{wire} must be <= {high}", lambda value: bool(value <= high))
            )
        return (*implied, *self.cel_rules(wire))

    def cel_rules(self, wire: str) -> tuple[Rule, ...]:
        """What the schema states in CEL: declared rules plus the one implied by `pattern` (`minimum`
        and `maximum` are the schema's own keywords)."""
        implied: list[Rule] = []
        if self.pattern is not None:
            compiled = re.compile(self.pattern)
            implied.append(
                Rule(
                    f"self.matches('{self.pattern}')",
                    self.pattern_message or f"{wire} must match {self.pattern}",
                    lambda value: compiled.search(value) is not None,
                )
            )
        return (*implied, *self.rules)


def prop(description: str, **options: Any) -> dict[str, Prop]:
    """Field metadata: `field(default=..., metadata=prop("why the field exists", minimum=0))`.

    A field without a default is required on the wire.
    """
    return {"prop": Prop(description, **options)}


def prop_of(field: dataclasses.Field[Any]) -> Prop:
    """The field's `Prop`; every model field must declare one (a field without a description is a bug)."""
    found = field.metadata.get("prop")
    if not isinstance(found, Prop):
        raise TypeError(f"model field {field.name} has no prop(...) metadata")
    return found


def wire_name(field: dataclasses.Field[Any]) -> str:
    """The field's camelCase name on the wire."""
    return prop_of(field).wire or camel(field.name)


def camel(name: str) -> str:
    """`retain_on_scale_in` → `retainOnScaleIn`."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def is_required(field: dataclasses.Field[Any]) -> bool:
    """A field without a default must be present on the wire."""
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def model_rules(cls: type) -> tuple[Rule, ...]:
    """Rules that span several fields of a model, declared as `RULES: ClassVar[tuple[Rule, ...]]`."""
    rules: tuple[Rule, ...] = getattr(cls, "RULES", ())
    return rules
