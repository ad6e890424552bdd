"""The review filter language: parsed here into a small AST, never passed on as text.

    query      = or_expr
    or_expr    = and_expr { "or" and_expr }
    and_expr   = unary { "and" unary }
    unary      = "not" unary | "(" or_expr ")" | call | predicate
    call       = "outside_hours" "(" operand "," operand "," operand "," operand ")"
    predicate  = field ( op operand | "in" "(" operand { "," operand } ")"
                       | "is" [ "not" ] "null" )
    op         = "=" | "!=" | "<" | "<=" | ">" | ">="
    operand    = literal | param | field
    literal    = number | string | "true" | "false"
    param      = ":" name
    field      = name | "input" "." key { "." key }

Keywords are case-insensitive; strings take double or single quotes with backslash escapes.
Which names are fields, and their types, is `fields.py`'s business (checked on binding).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from interlock.domain.errors import InvalidFilterError

Op = Literal["=", "!=", "<", "<=", ">", ">="]
Scalar = str | int | float | bool | datetime  # a time once bound (fields.py)
MAX_LENGTH, MAX_NODES, MAX_DEPTH, MAX_LIST = 2000, 64, 16, 200
KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "true", "false"})
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>-?\d+(?:\.\d+)?(?![\w.]))
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<param>:[a-z_][a-z0-9_]{0,63})
  | (?P<name>[A-Za-z_][A-Za-z0-9_]{0,63}(?:\.[A-Za-z_][A-Za-z0-9_]{0,63})*)
  | (?P<op>!=|<=|>=|=|<|>)
  | (?P<punct>[(),])
""", re.VERBOSE)


@dataclass(frozen=True)
class Field:
    path: tuple[str, ...]  # ("tool",) or ("input", "amount", ...)


@dataclass(frozen=True)
class Value:
    value: Scalar


@dataclass(frozen=True)
class Param:
    name: str


Operand = Field | Value | Param


@dataclass(frozen=True)
class Compare:
    field: Field
    op: Op
    operand: Operand


@dataclass(frozen=True)
class In:
    field: Field
    options: tuple[Operand, ...]


@dataclass(frozen=True)
class IsNull:
    field: Field
    negated: bool


@dataclass(frozen=True)
class OutsideHours:
    tz: Operand
    start: Operand
    end: Operand
    days: Operand


@dataclass(frozen=True)
class Not:
    inner: Node


@dataclass(frozen=True)
class Both:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Either:
    parts: tuple[Node, ...]


Node = Compare | In | IsNull | OutsideHours | Not | Both | Either


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    at: int


def tokens(text: str) -> list[_Tok]:
    """The tokens of `text`; anything else is refused with its position."""
    if len(text) > MAX_LENGTH:
        raise InvalidFilterError(f"longer than {MAX_LENGTH} characters")
    found, at = [], 0
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None:
            raise InvalidFilterError(f"unexpected character {text[at]!r}", position=at)
        kind = m.lastgroup or ""
        if kind != "space":
            found.append(_Tok(kind, m.group(), at))
        at = m.end()
    return found


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks, self.i, self.nodes, self.end = tokens(text), 0, 0, len(text)

    def parse(self) -> Node:
        if not self.toks:
            raise InvalidFilterError("the filter is empty")
        node = self.or_expr(0)
        if self.i < len(self.toks):
            tok = self.toks[self.i]
            raise InvalidFilterError(f"unexpected {tok.text!r}", position=tok.at)
        return node

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def word(self, *words: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == "name" and tok.text.lower() in words:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> None:
        tok = self.peek()
        if tok is None or tok.text != text:
            raise InvalidFilterError(f"expected {text!r}", position=tok.at if tok else self.end)
        self.i += 1

    def count(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH:
            raise InvalidFilterError(f"more than {MAX_NODES} conditions or {MAX_DEPTH} levels")

    def or_expr(self, depth: int) -> Node:
        parts = [self.and_expr(depth)]
        while self.word("or"):
            parts.append(self.and_expr(depth))
        return parts[0] if len(parts) == 1 else Either(tuple(parts))

    def and_expr(self, depth: int) -> Node:
        parts = [self.unary(depth)]
        while self.word("and"):
            parts.append(self.unary(depth))
        return parts[0] if len(parts) == 1 else Both(tuple(parts))

    def unary(self, depth: int) -> Node:
        self.count(depth)
        if self.word("not"):
            return Not(self.unary(depth + 1))
        tok = self.peek()
        if tok is not None and tok.text == "(":
            self.i += 1
            node = self.or_expr(depth + 1)
            self.expect(")")
            return node
        if tok is not None and tok.kind == "name" and tok.text.lower() == "outside_hours":
            self.i += 1
            return self.outside_hours()
        return self.predicate()

    def outside_hours(self) -> OutsideHours:
        self.expect("(")
        args = [self.operand()]
        for _ in range(3):
            self.expect(",")
            args.append(self.operand())
        self.expect(")")
        return OutsideHours(*args)

    def predicate(self) -> Node:
        field = self.field()
        if self.word("is"):
            negated = self.word("not")
            if not self.word("null"):
                raise InvalidFilterError("expected null", position=self._at())
            return IsNull(field, negated)
        if self.word("in"):
            self.expect("(")
            options = [self.operand()]
            while self.peek() is not None and self.peek().text == ",":  # type: ignore[union-attr]
                self.i += 1
                options.append(self.operand())
            self.expect(")")
            if len(options) > MAX_LIST:
                raise InvalidFilterError(f"an in-list holds at most {MAX_LIST} values")
            return In(field, tuple(options))
        tok = self.peek()
        if tok is None or tok.kind != "op":
            raise InvalidFilterError("expected a comparison (=, !=, <, <=, >, >=, in, is)",
                                     position=self._at())
        self.i += 1
        return Compare(field, tok.text, self.operand())  # type: ignore[arg-type]

    def field(self) -> Field:
        tok = self.peek()
        if tok is None or tok.kind != "name" or tok.text.lower() in KEYWORDS:
            raise InvalidFilterError("expected a field name", position=self._at())
        self.i += 1
        return Field(tuple(tok.text.split(".")))

    def operand(self) -> Operand:
        tok = self.peek()
        if tok is None:
            raise InvalidFilterError("expected a value", position=self.end)
        self.i += 1
        if tok.kind == "number":
            return Value(float(tok.text) if "." in tok.text else int(tok.text))
        if tok.kind == "string":
            return Value(_unquote(tok.text))
        if tok.kind == "param":
            return Param(tok.text[1:])
        if tok.kind == "name" and tok.text.lower() in ("true", "false"):
            return Value(tok.text.lower() == "true")
        if tok.kind == "name" and tok.text.lower() not in KEYWORDS:
            return Field(tuple(tok.text.split(".")))
        raise InvalidFilterError(f"expected a value, found {tok.text!r}", position=tok.at)

    def _at(self) -> int:
        tok = self.peek()
        return tok.at if tok is not None else self.end


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def parse(text: str) -> Node:
    """The AST of a filter; InvalidFilterError names the problem and where it is."""
    return _Parser(text).parse()
