"""Wire dicts ⇄ model dataclasses, checked against the same field metadata the CRD schema comes from.

Decoding fills defaults, refuses unknown keys (a typo must not pass silently) except in open objects,
and raises `ValidationError` with the path of the first offending field, e.g. `spec.partitions`. A body
read from the API server is decoded `tolerant` of unknown keys (`tolerating_unknown`): the server's
schema has already refused typos, so a key unknown here is a field of another version of the CRD (an
upgrade's new field under a rolled-back operator, a newer operator's target under an older
executor), and refusing it would stop the app or the member.
Encoding writes camelCase keys and leaves out unset optional fields.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Literal, TypeVar, Union

from streamapp.api.fields import Prop, Rule, ValidationError, is_required, model_rules, prop_of, wire_name

T = TypeVar("T")
_TOLERANT: ContextVar[bool] = ContextVar("tolerant", default=False)


@contextlib.contextmanager
def tolerating_unknown() -> Iterator[None]:
    """Within it, `decode` leaves out keys the models do not know instead of refusing them."""
    token = _TOLERANT.set(True)
    try:
        yield
    finally:
        _TOLERANT.reset(token)


_HINTS: dict[type, dict[str, Any]] = {}


def field_types(cls: type) -> dict[str, Any]:
    """Resolved type hints of a model (the models use postponed annotations), computed once per class."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def optional_inner(tp: Any) -> Any | None:
    """`X` for `X | None`, else None."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return None


@dataclasses.dataclass(frozen=True)
class _Slot:
    """One field of a model as decoding needs it, worked out once per class: a member's report of
    100,000 copies is decoded field by field, and introspection per field would dominate a reconcile."""

    name: str
    key: str
    meta: Prop
    decoder: Callable[[object, str], Any]
    required: bool
    rules: tuple[Rule, ...]


_SLOTS: dict[type, tuple[tuple[_Slot, ...], str | None]] = {}


def _slots(cls: type) -> tuple[tuple[_Slot, ...], str | None]:
    """The decodable fields of a model and the name of its `rest` field (open objects), if any."""
    if cls not in _SLOTS:
        slots: list[_Slot] = []
        rest: str | None = None
        for field in dataclasses.fields(cls):
            meta = prop_of(field)
            if meta.rest:
                rest = field.name
                continue
            key = wire_name(field)
            decoder = meta.codec.decode if meta.codec else _decoder(field_types(cls)[field.name])
            slots.append(_Slot(field.name, key, meta, decoder, is_required(field), meta.all_rules(key)))
        _SLOTS[cls] = (tuple(slots), rest)
    return _SLOTS[cls]


def decode(cls: type[T], data: object, path: str) -> T:
    """A model instance from its wire dict."""
    if not isinstance(data, Mapping):
        raise ValidationError(path, f"expected an object, got {data!r}")
    values: dict[str, Any] = {}
    slots, rest_field = _slots(cls)
    for slot in slots:
        raw = data.get(slot.key)
        if raw is None:
            if slot.required:
                raise ValidationError(f"{path}.{slot.key}", "required")
            continue
        child = f"{path}.{slot.key}"
        value = slot.decoder(raw, child)
        if slot.rules:
            _check_rules(slot.rules, value, child)
        _check_bounds(slot.meta.max_length, slot.meta.max_items, value, child)
        if slot.meta.list_map_keys:
            _check_unique(slot.meta.list_map_keys, value, child)
        values[slot.name] = value
    if rest_field is not None or len(data) > len(values):
        known = {slot.key for slot in slots}
        unknown = {k: v for k, v in data.items() if k not in known}
        if rest_field is not None:
            values[rest_field] = dict(unknown)
        elif unknown and not _TOLERANT.get():
            raise ValidationError(path, f"unknown field(s) {', '.join(sorted(unknown))}")
    instance = cls(**values)
    _check_rules(model_rules(cls), instance, path)
    return instance


def decode_value(tp: Any, raw: object, path: str) -> Any:
    """A Python value of type `tp` from a wire value."""
    return _decoder(tp)(raw, path)


@functools.cache
def _decoder(tp: Any) -> Callable[[object, str], Any]:
    """The function that decodes wire values of type `tp`, built once per type: a member's report of
    thousands of copies must not pay type introspection per value."""
    inner = optional_inner(tp)
    if inner is not None:
        return _decoder(inner)
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        model = typing.cast(type, tp)
        return lambda raw, path: decode(model, raw, path)
    if origin is Literal:
        return functools.partial(_decode_literal, typing.get_args(tp))
    if origin is tuple:
        return functools.partial(_decode_tuple, _decoder(typing.get_args(tp)[0]))
    if origin is dict:
        return functools.partial(_decode_dict, _decoder(typing.get_args(tp)[1]))
    return functools.partial(_decode_scalar, tp)


def _decode_literal(choices: tuple[Any, ...], raw: object, path: str) -> Any:
    if raw not in choices:
        raise ValidationError(path, f"expected one of {', '.join(map(str, choices))}, got {raw!r}")
    return raw


def _decode_tuple(item: Callable[[object, str], Any], raw: object, path: str) -> tuple[Any, ...]:
    if not isinstance(raw, list | tuple):
        raise ValidationError(path, f"expected a list, got {raw!r}")
    return tuple(item(v, f"{path}[{i}]") for i, v in enumerate(raw))


def _decode_dict(value: Callable[[object, str], Any], raw: object, path: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ValidationError(path, f"expected an object, got {raw!r}")
    return {str(k): value(v, f"{path}.{k}") for k, v in raw.items()}


def _decode_scalar(tp: Any, raw: object, path: str) -> Any:
    if tp is Any:
        return raw
    if tp is bool:
        if not isinstance(raw, bool):
            raise ValidationError(path, f"expected true or false, got {raw!r}")
        return raw
    if tp is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValidationError(path, f"expected an integer, got {raw!r}")
        return raw
    if tp is float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ValidationError(path, f"expected a number, got {raw!r}")
        return float(raw)
    if tp is str:
        if not isinstance(raw, str):
            raise ValidationError(path, f"expected a string, got {raw!r}")
        return raw
    raise TypeError(f"{path}: the model uses unsupported type {tp!r}")


def _check_rules(rules: tuple[Rule, ...], value: object, path: str) -> None:
    for rule in rules:
        if rule.check is not None and not rule.check(value):
            message = rule.explain(value) if rule.explain else rule.message
            raise ValidationError(path + rule.field_path, message)


def _check_bounds(max_length: int | None, max_items: int | None, value: object, path: str) -> None:
    if max_length is not None and isinstance(value, str) and len(value) > max_length:
        raise ValidationError(path, f"must be at most {max_length} characters long")
    if max_items is not None and isinstance(value, tuple | dict) and len(value) > max_items:
        raise ValidationError(path, f"must have at most {max_items} items")


def _check_unique(keys: tuple[str, ...], value: object, path: str) -> None:
    """Entries of a keyed list differ in their keys: the API server checks that only for lists it keeps
    as maps, and the models check it for atomic ones too (a report naming one copy twice is not read)."""
    if not isinstance(value, tuple):
        return
    seen: set[tuple[object, ...]] = set()
    for index, item in enumerate(value):
        key = tuple(item.get(k) if isinstance(item, Mapping) else getattr(item, k) for k in keys)
        if key in seen:
            raise ValidationError(f"{path}[{index}]", f"duplicate entry for {', '.join(keys)} {key}")
        seen.add(key)


_FIELDS: dict[type, tuple[tuple[str, str, Any, bool], ...]] = {}


def _fields(cls: type) -> tuple[tuple[str, str, Any, bool], ...]:
    """(attribute, wire key, codec, is the rest of an open object) per field, once per class."""
    if cls not in _FIELDS:
        _FIELDS[cls] = tuple(
            (field.name, wire_name(field), prop_of(field).codec, prop_of(field).rest)
            for field in dataclasses.fields(cls)
        )
    return _FIELDS[cls]


def encode(obj: object) -> Any:
    """The wire form of a model instance or value: camelCase keys, unset optional fields left out."""
    if hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for name, key, codec, rest in _fields(type(obj)):
            value = getattr(obj, name)
            if rest:
                out.update(encode(value))
            elif value is not None:
                out[key] = codec.encode(value) if codec else encode(value)
        return out
    if isinstance(obj, tuple | list):
        return [encode(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: encode(v) for k, v in obj.items()}
    return obj
