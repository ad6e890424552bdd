"""A bound review filter as a SQL condition of the review facts table, per dialect.

Field names map to fixed column expressions written here; every value, JSON path and
time zone is a bound parameter (`%(fN)s`). Nothing a client sends becomes SQL text.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from interlock.domain.chat.policies import normalise_id
from interlock.domain.review.fields import field_type
from interlock.domain.review.filters import (
    Both,
    Compare,
    Either,
    Field,
    In,
    IsNull,
    Node,
    Not,
    OutsideHours,
    Value,
)
from interlock.projections.engine.sql import Dialect

_PRINCIPAL = {"actor": "actor_norm", "requested_by": "requested_norm",
              "edited_by": "edited_norm", "requester": "requester_norm",
              "for_actor": "for_actor_norm"}
_FLIP = {"=": "<>", "!=": "="}
_JSON_TYPES = {"postgresql": {"number": "('number')", "string": "('string')",
                              "boolean": "('boolean')"},
               "sqlite": {"number": "('integer', 'real')", "string": "('text')",
                          "boolean": "('true', 'false')"}}


class Compiler:
    """One filter's condition and its parameters."""

    def __init__(self, dialect: Dialect, encode_ts: Callable[[datetime], Any]) -> None:
        self.dialect, self.encode_ts = dialect, encode_ts
        self.params: dict[str, Any] = {}

    def bind(self, value: Any) -> str:
        name = f"f{len(self.params)}"
        self.params[name] = value
        return f"%({name})s"

    def sql(self, node: Node) -> str:
        if isinstance(node, Both | Either):
            joint = " AND " if isinstance(node, Both) else " OR "
            return "(" + joint.join(self.sql(p) for p in node.parts) + ")"
        if isinstance(node, Not):
            return f"NOT {self.sql(node.inner)}"
        if isinstance(node, IsNull):
            return self._is_null(node)
        if isinstance(node, In):
            if not node.options:
                return "1 = 0"
            return "(" + " OR ".join(self.sql(Compare(node.field, "=", o))
                                     for o in node.options) + ")"
        if isinstance(node, OutsideHours):
            return self._outside_hours(node)
        return self._compare(node)

    def _column(self, field: Field) -> str:
        name = ".".join(field.path)
        return _PRINCIPAL.get(name, name)

    def _compare(self, node: Compare) -> str:
        kind = field_type(node.field)
        if kind == "json":
            return self._json(node)
        column = self._column(node.field)
        if kind == "bool":
            assert isinstance(node.operand, Value)
            truth = bool(node.operand.value) == (node.op == "=")
            return column if truth else f"NOT {column}"
        op = "<>" if node.op == "!=" else node.op
        if isinstance(node.operand, Field):
            return f"{column} {op} {self._column(node.operand)}"
        assert isinstance(node.operand, Value)
        value: Any = node.operand.value
        if kind == "principal":
            value = normalise_id(str(value))
        elif kind == "time":
            value = self.encode_ts(value)
        return f"{column} {op} {self.bind(value)}"

    def _path(self, field: Field) -> tuple[str, str]:
        keys = list(field.path[1:])
        if self.dialect == "postgresql":
            path = self.bind(keys)
            return f"json_typeof(input #> {path})", f"(input #>> {path})"
        path = self.bind("$." + ".".join(keys))
        return f"json_type(input, {path})", f"json_extract(input, {path})"

    def _json(self, node: Compare) -> str:
        assert isinstance(node.operand, Value)
        value, op = node.operand.value, "<>" if node.op == "!=" else node.op
        typeof, extract = self._path(node.field)
        types = _JSON_TYPES[self.dialect]
        if isinstance(value, bool):
            if op not in ("=", "<>"):
                raise AssertionError("bound filters compare booleans with = and != only")
            word = "true" if value == (op == "=") else "false"
            if self.dialect == "sqlite":
                return f"{typeof} = {self.bind(word)}"
            return f"({typeof} = 'boolean' AND {extract} = {self.bind(word)})"
        kind = "string" if isinstance(value, str) else "number"
        if kind == "number" and self.dialect == "postgresql":  # CASE: the cast only of numbers
            guarded = f"CASE WHEN {typeof} = 'number' THEN {extract}::numeric END"
            return f"{guarded} {op} {self.bind(value)}"
        return f"({typeof} IN {types[kind]} AND {extract} {op} {self.bind(value)})"

    def _is_null(self, node: IsNull) -> str:
        if field_type(node.field) == "json":
            typeof, _ = self._path(node.field)
            cond = f"({typeof} IS NULL OR {typeof} = 'null')"
        else:
            cond = f"{self._column(node.field)} IS NULL"
        return f"NOT {cond}" if node.negated else cond

    def _outside_hours(self, node: OutsideHours) -> str:
        tz, start, end, days = (o.value for o in (node.tz, node.start, node.end, node.days)
                                if isinstance(o, Value))
        zone = self.bind(tz)
        if self.dialect == "postgresql":
            local = f"(decided_at AT TIME ZONE {zone})"
            dow, clock = f"extract(isodow FROM {local})::int", f"to_char({local}, 'HH24:MI')"
        else:
            dow, clock = f"review_isodow(decided_at, {zone})", f"review_clock(decided_at, {zone})"
        listed = ", ".join(self.bind(int(d)) for d in str(days).split(","))
        inside = (f"{dow} IN ({listed}) AND {clock} >= {self.bind(start)}"
                  f" AND {clock} < {self.bind(end)}")
        return f"NOT ({inside})"


def compile_filter(node: Node, dialect: Dialect,
                   encode_ts: Callable[[datetime], Any]) -> tuple[str, dict[str, Any]]:
    """The condition and its parameters (named f0, f1, ...)."""
    compiler = Compiler(dialect, encode_ts)
    return compiler.sql(node), compiler.params
