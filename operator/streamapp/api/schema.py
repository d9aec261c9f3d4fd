"""OpenAPI v3 schemas (the structural kind a CRD needs) derived from the model dataclasses.

Descriptions come from field metadata and class docstrings, defaults from the dataclass defaults, enums
from `Literal` types, bounds (`minimum`, `maximum`, `maxLength`, `maxItems`) from the field's `Prop`, and
CEL rules from the same `Rule`s the Python validation runs — so the CRD says exactly what
`codec.decode` accepts.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Literal

from streamapp.api.codec import encode, field_types, optional_inner
from streamapp.api.fields import Prop, is_required, model_rules, prop_of, wire_name

_SCALARS: dict[Any, dict[str, Any]] = {
    bool: {"type": "boolean"},
    int: {"type": "integer", "format": "int64"},
    float: {"type": "number"},
    str: {"type": "string"},
}
PRESERVE_UNKNOWN = "x-kubernetes-preserve-unknown-fields"


def model_schema(cls: type) -> dict[str, Any]:
    """The object schema of a model dataclass."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    schema: dict[str, Any] = {"type": "object", "description": describe(cls)}
    for field in dataclasses.fields(cls):
        meta = prop_of(field)
        if meta.rest:
            schema[PRESERVE_UNKNOWN] = True
            continue
        key = wire_name(field)
        properties[key] = field_schema(field, field_types(cls)[field.name], meta, key)
        if is_required(field):
            required.append(key)
    schema["properties"] = properties
    if required:
        schema["required"] = required
    rules = model_rules(cls)
    if rules:
        schema["x-kubernetes-validations"] = [rule.to_schema() for rule in rules]
    return schema


def describe(cls: type) -> str:
    """The first paragraph of a model's docstring, on one line."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    return " ".join(doc.split("\n\n")[0].split())


def field_schema(field: dataclasses.Field[Any], tp: Any, meta: Prop, key: str) -> dict[str, Any]:
    """A field's schema: its type's schema plus description, default, bounds and rules."""
    schema = meta.codec.schema() if meta.codec else type_schema(tp)
    schema["description"] = meta.description
    default = _default(field)
    if default is not None:
        schema["default"] = default
    for keyword, value in (
        ("format", meta.format),
        ("minimum", meta.minimum),
        ("maximum", meta.maximum),
        ("maxLength", meta.max_length),
        ("maxProperties" if schema.get("type") == "object" else "maxItems", meta.max_items),
    ):
        if value is not None:
            schema[keyword] = value
    if meta.atomic:
        schema["x-kubernetes-list-type"] = "atomic"
    elif meta.list_map_keys:
        schema["x-kubernetes-list-type"] = "map"
        schema["x-kubernetes-list-map-keys"] = list(meta.list_map_keys)
    rules = meta.cel_rules(key)
    if rules:
        schema["x-kubernetes-validations"] = [rule.to_schema() for rule in rules]
    return schema


def type_schema(tp: Any) -> dict[str, Any]:
    """The schema of a Python type used in the models."""
    inner = optional_inner(tp)
    if inner is not None:
        return type_schema(inner)
    if dataclasses.is_dataclass(tp):
        return model_schema(typing.cast(type, tp))
    origin = typing.get_origin(tp)
    if origin is Literal:
        return {"type": "string", "enum": list(typing.get_args(tp))}
    if origin is tuple:
        return {"type": "array", "items": type_schema(typing.get_args(tp)[0])}
    if origin is dict:
        value_type = typing.get_args(tp)[1]
        if value_type is Any:
            return {"type": "object", PRESERVE_UNKNOWN: True}
        return {"type": "object", "additionalProperties": type_schema(value_type)}
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    raise TypeError(f"the model uses unsupported type {tp!r}")


def _default(field: dataclasses.Field[Any]) -> Any:
    """The wire default: scalars and non-empty lists as they are, `{}` for a nested model (the API server
    then fills in that model's own defaults), nothing for optional fields and empty collections."""
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return None
    if dataclasses.is_dataclass(value):
        return {}
    wire = encode(value)
    if wire is None or wire == [] or wire == {}:
        return None
    return wire
