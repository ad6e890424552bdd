"""The named fields a review filter may use, their types, and binding a parsed filter:
every parameter replaced by its value, every value checked against its field's type."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from interlock.domain.errors import InvalidFilterError
from interlock.domain.review.filters import (
    Both,
    Compare,
    Either,
    Field,
    In,
    IsNull,
    Node,
    Not,
    Operand,
    OutsideHours,
    Param,
    Value,
)

FieldType = Literal["text", "principal", "number", "time", "bool", "kind", "json"]
KINDS = ("respond", "restart", "approve", "edit", "reject", "expire", "withdraw")
# One row per decision (docs/review.md describes each field).
FIELDS: Mapping[str, FieldType] = {
    "chat_id": "text", "ref": "text", "agent": "text", "tool": "text", "kind": "kind",
    "fingerprint": "text", "actor": "principal", "requested_by": "principal",
    "edited_by": "principal", "requester": "principal", "wait_seconds": "number",
    "version": "number", "prior_expiries": "number", "fingerprint_changes": "number",
    "asked_at": "time", "decided_at": "time", "requester_approved": "bool", "edited": "bool",
    "reasked": "bool", "fingerprint_changed": "bool", "viewed": "bool", "viewed_at": "time",
    "policy": "text",
}
_ORDERED = frozenset({"text", "number", "time", "json"})
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_CLOCK = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def field_type(field: Field) -> FieldType:
    """The field's type; an unknown name is refused, naming the known ones."""
    if field.path[0] == "input" and len(field.path) > 1:
        if not all(_KEY.fullmatch(k) for k in field.path[1:]) or len(field.path) > 6:
            raise InvalidFilterError(f"bad input path {'.'.join(field.path)!r}")
        return "json"
    kind = FIELDS.get(".".join(field.path))
    if kind is None:
        raise InvalidFilterError(f"unknown field {'.'.join(field.path)!r}",
                                 field=".".join(field.path), known=sorted(FIELDS))
    return kind


def bind(node: Node, params: Mapping[str, Any]) -> Node:
    """`node` with each parameter's value in place, every comparison type-checked."""
    if isinstance(node, Both | Either):
        return replace(node, parts=tuple(bind(p, params) for p in node.parts))
    if isinstance(node, Not):
        return Not(bind(node.inner, params))
    if isinstance(node, IsNull):
        field_type(node.field)
        return node
    if isinstance(node, In):
        kind = field_type(node.field)
        values = [v for o in node.options for v in _expand(o, params)]
        return In(node.field, tuple(_check(kind, node.field, v) for v in values))
    if isinstance(node, OutsideHours):
        return _hours(node, params)
    kind = field_type(node.field)
    operand = _resolve(node.operand, params)
    if node.op not in ("=", "!=") and kind not in _ORDERED:
        raise InvalidFilterError(f"{'.'.join(node.field.path)} takes only = and != "
                                 f"(not {node.op})")
    return Compare(node.field, node.op, _check(kind, node.field, operand))


def _resolve(operand: Operand, params: Mapping[str, Any]) -> Operand:
    if not isinstance(operand, Param):
        return operand
    if operand.name not in params:
        raise InvalidFilterError(f"parameter :{operand.name} is not given", param=operand.name)
    value = params[operand.name]
    if isinstance(value, list | dict) or value is None:
        raise InvalidFilterError(f"parameter :{operand.name} must be one scalar",
                                 param=operand.name)
    return Value(value)


def _expand(operand: Operand, params: Mapping[str, Any]) -> list[Operand]:
    """An in-list's entries: a list parameter stands for its values."""
    if isinstance(operand, Param) and isinstance(params.get(operand.name), list):
        return [_resolve(Value(v), params) if not isinstance(v, list | dict) else
                _refuse_list(operand.name) for v in params[operand.name]]
    return [_resolve(operand, params)]


def _refuse_list(name: str) -> Operand:
    raise InvalidFilterError(f"parameter :{name} must list scalars", param=name)


def _check(kind: FieldType, field: Field, operand: Operand) -> Operand:
    """The operand as the field compares it; a value of another type is refused."""
    name = ".".join(field.path)
    if isinstance(operand, Field):
        other = field_type(operand)
        same = {kind, other} <= {"text", "kind"} or other == kind
        if not same or kind == "json":
            raise InvalidFilterError(f"{name} cannot be compared with {'.'.join(operand.path)}")
        return operand
    assert isinstance(operand, Value)
    return Value(_value(kind, name, operand.value))


def _value(kind: FieldType, name: str, value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool) and not (
            abs(value) < 2**63 and math.isfinite(value)):  # an int this large has no float
        raise InvalidFilterError(
            f"{name}: {_shown(value)} is not a number a store can compare (|n| < 2**63)")
    if kind == "json":
        if not isinstance(value, str | int | float | bool):
            raise InvalidFilterError(f"{name} compares with a string, number or boolean")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise InvalidFilterError(f"{name} is true or false")
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidFilterError(f"{name} compares with a number, not {value!r}")
        return value
    if not isinstance(value, str):
        raise InvalidFilterError(f"{name} compares with a string, not {value!r}")
    if kind == "kind" and value not in KINDS:
        raise InvalidFilterError(f"kind is one of {', '.join(KINDS)}, not {value!r}")
    if kind == "time":
        return _instant(name, value)
    return value


def _instant(name: str, value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidFilterError(f"{name} compares with an ISO-8601 time, not {value!r}") from None
    if moment.tzinfo is None:
        raise InvalidFilterError(f"{name}: {value!r} needs a time zone (Z or +hh:mm)")
    return moment


def _hours(node: OutsideHours, params: Mapping[str, Any]) -> OutsideHours:
    tz, start, end, days = (_text(_resolve(o, params), what) for o, what in (
        (node.tz, "time zone"), (node.start, "start"), (node.end, "end"), (node.days, "days")))
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidFilterError(f"unknown time zone {tz!r}") from None
    for clock in (start, end):
        if not _CLOCK.fullmatch(clock):
            raise InvalidFilterError(f"working hours are HH:MM, not {clock!r}")
    if start >= end:
        raise InvalidFilterError(f"working hours start ({start}) before they end ({end})")
    return OutsideHours(Value(tz), Value(start), Value(end), Value(",".join(
        str(d) for d in weekdays(days))))


def _text(operand: Operand, what: str) -> str:
    if not isinstance(operand, Value) or not isinstance(operand.value, str):
        raise InvalidFilterError(f"outside_hours: the {what} is a string")
    return operand.value


def weekdays(spec: str) -> list[int]:
    """ISO weekdays (1 = Monday) of `mon-fri` or `mon,wed,sat`."""
    found: set[int] = set()
    for part in spec.lower().replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if first not in DAYS or (last and last not in DAYS):
            raise InvalidFilterError(f"working days are like mon-fri or mon,tue; not {spec!r}")
        a, b = DAYS.index(first), DAYS.index(last or first)
        if b < a:
            raise InvalidFilterError(f"working days run forwards: {part!r}")
        found.update(range(a + 1, b + 2))
    return sorted(found)


def _shown(value: int | float) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text.lstrip('-'))} digits)"
