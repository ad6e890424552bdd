"""Form data back to the JSON value a generated form describes (forms.py draws the form).

Inputs are named by their path: `address.city`, `lines.0.qty`, `tags.2`. A blank optional
value is left out (its default applies) or null when the schema allows only that; an array
row left blank is dropped, so a form without JavaScript offers a spare row to fill. A value
that is not even a number stays as typed: the schema check then names the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from interlock.api.ui.forms import JSON_FIELD, FormField, SchemaForm

_MISSING: Any = object()
MAX_ROWS = 10_000  # an array row's index; a form holds far fewer fields
_TRUE, _FALSE = frozenset({"on", "true", "yes"}), frozenset({"false", "no"})


class FormError(ValueError):
    """Form data that cannot become the JSON value at all (before schema validation)."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(e["msg"] for e in errors))
        self.errors = errors


@dataclass(frozen=True)
class RawText:
    """A free-form value as typed, when it is not JSON (shown again, never sent)."""

    text: str


def parse_form(form: SchemaForm, data: dict[str, str]) -> Any:
    """The JSON value the submitted fields describe; FormError names what cannot be read."""
    value, errors = _Reader(data, strict=True).form(form)
    if errors:
        raise FormError(errors)
    return value


def refill(form: SchemaForm, data: dict[str, str]) -> Any:
    """What was submitted, as a value to draw the form with again (bad JSON kept as typed)."""
    value, _ = _Reader(data, strict=False).form(form)
    return value


class _Reader:
    def __init__(self, data: dict[str, str], strict: bool) -> None:
        self.data, self.strict, self.errors = data, strict, list[dict[str, Any]]()

    def form(self, form: SchemaForm) -> tuple[Any, list[dict[str, Any]]]:
        if form.fields is None:
            return self.json(JSON_FIELD, self.data.get(JSON_FIELD, ""), []), self.errors
        value = self.members(form.fields, "")
        if form.decision is not None:
            value[form.decision] = self.decision(form.decision)
        return value, self.errors

    def members(self, fields: tuple[FormField, ...], prefix: str) -> dict[str, Any]:
        found = {f.name: self.read(f, f"{prefix}{f.name}") for f in fields}
        return {k: v for k, v in found.items() if v is not _MISSING}

    def read(self, f: FormField, path: str) -> Any:
        if f.kind == "object":
            if f.optional and self.blank(path):
                return None if f.nullable and f.required else _MISSING
            return self.members(f.fields, path + ".")
        if f.kind == "array":
            return self.rows(f, path)
        return self.scalar(f, path, self.data.get(path, ""))

    def rows(self, f: FormField, path: str) -> Any:
        if f.item is None:
            return []
        indexes = (whole_number(k[len(path) + 1:].split(".")[0], 0, MAX_ROWS)
                   for k in self.data if k.startswith(path + "."))
        found = {i for i in indexes if i is not None}
        rows = [self.read(f.item, f"{path}.{i}") for i in sorted(found)
                if not self.blank(f"{path}.{i}")]
        return [r for r in rows if r is not _MISSING]

    def blank(self, path: str) -> bool:
        return not any(v.strip() for k, v in self.data.items()
                       if k == path or k.startswith(path + "."))

    def scalar(self, f: FormField, path: str, raw: str) -> Any:
        if f.kind == "boolean":
            return raw in _TRUE
        if (raw == "") if f.kind == "text" else (raw.strip() == ""):
            if not f.required:
                return _MISSING
            if f.nullable or f.kind == "tristate":
                return None
            return raw  # a required value left blank: the schema check names it
        if f.kind == "tristate":
            return raw in _TRUE
        if f.kind == "choice":
            return next((v for label, v in f.options if label == raw), raw)
        if f.kind in ("integer", "number"):
            return _number(f, raw) if self.strict else raw  # shown again as typed
        if f.kind == "json":
            return self.json(path, raw, path.split("."))
        return raw

    def decision(self, name: str) -> Any:
        raw = self.data.get(name, "")
        if raw in _TRUE or raw in _FALSE:
            return raw in _TRUE
        self.errors.append({"loc": [name], "msg": "choose Approve or Decline", "type": "missing"})
        return _MISSING

    def json(self, path: str, text: str, loc: list[str]) -> Any:
        try:
            return json.loads(text)
        except ValueError as exc:
            self.errors.append({"loc": loc, "msg": f"not valid JSON: {exc}", "type": "json"})
            return RawText(text) if not self.strict else None


def _number(f: FormField, raw: str) -> Any:
    try:
        return int(raw) if f.kind == "integer" else float(raw)
    except ValueError:
        return raw  # the schema check names the field and the problem


def whole_number(raw: str, low: int, high: int) -> int | None:
    """`raw` as a whole number from `low` to `high`, in ASCII digits (`"²".isdigit()` is
    true, and `int` refuses it), else None."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(high)):
        return None
    number = int(raw)
    return number if low <= number <= high else None
