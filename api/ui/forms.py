"""HTML forms from a tool's JSON schema, and form data back to the JSON value.

A flat object of strings, numbers, booleans and enums becomes one labelled input per field
with the HTML constraints the schema allows (checked in the browser before submit); any
other schema becomes one JSON text area. The server validates again either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

FieldKind = Literal["text", "integer", "number", "boolean", "choice"]
_KINDS: dict[str, FieldKind] = {"string": "text", "integer": "integer", "number": "number",
                                "boolean": "boolean"}
JSON_FIELD = "__json__"


class FormError(ValueError):
    """Form data that cannot become the JSON value at all (before schema validation)."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(e["msg"] for e in errors))
        self.errors = errors


@dataclass(frozen=True)
class FormField:
    """One input of a generated form."""

    name: str
    label: str
    kind: FieldKind
    required: bool
    description: str = ""
    default: Any = None
    options: tuple[str, ...] = ()
    attrs: dict[str, str] = field(default_factory=dict)  # HTML constraints


@dataclass(frozen=True)
class SchemaForm:
    """The inputs of one form; `fields` is None when the value is edited as JSON."""

    fields: tuple[FormField, ...] | None
    schema: dict[str, Any]

    def parse(self, data: dict[str, str]) -> Any:
        """The JSON value the submitted fields describe."""
        if self.fields is None:
            return _json_value(data.get(JSON_FIELD, ""))
        return {f.name: v for f in self.fields if (v := _value(f, data)) is not _MISSING}


_MISSING = object()


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise FormError([{"loc": [], "msg": f"not valid JSON: {exc}", "type": "json"}]) from None


def _value(f: FormField, data: dict[str, str]) -> Any:
    raw = data.get(f.name, "")
    if f.kind == "boolean":
        return raw == "on"
    if raw == "" and not f.required:
        return _MISSING
    if f.kind in ("integer", "number"):
        try:
            return int(raw) if f.kind == "integer" else float(raw)
        except ValueError:
            return raw  # the schema check names the field and the problem
    return raw


def schema_form(schema: dict[str, Any] | None) -> SchemaForm:
    """A form for `schema` (None: any JSON value)."""
    schema = schema or {}
    target = _resolve(schema, schema)
    props = target.get("properties")
    if target.get("type") != "object" or not isinstance(props, dict) or not props:
        return SchemaForm(None, schema)
    required = set(target.get("required", ()))
    fields = [_field(name, _resolve(spec, schema), name in required)
              for name, spec in props.items()]
    if any(f is None for f in fields):
        return SchemaForm(None, schema)
    return SchemaForm(tuple(f for f in fields if f is not None), schema)


def _resolve(spec: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved: dict[str, Any] = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return resolved
    return spec


def _field(name: str, spec: dict[str, Any], required: bool) -> FormField | None:
    enum = spec.get("enum")
    choice = isinstance(enum, list) and all(isinstance(v, str) for v in enum)
    kind: FieldKind | None = "choice" if choice else _KINDS.get(str(spec.get("type")))
    if kind is None:
        return None
    return FormField(name=name, label=str(spec.get("title") or name), kind=kind,
                     required=required, description=str(spec.get("description", "")),
                     default=spec.get("default"), options=tuple(enum or ()) if choice else (),
                     attrs=_constraints(kind, spec))


def _constraints(kind: FieldKind, spec: dict[str, Any]) -> dict[str, str]:
    """HTML validation attributes equivalent to the schema's (the server checks the rest)."""
    attrs: dict[str, str] = {}
    if kind == "text":
        for key, attr in (("minLength", "minlength"), ("maxLength", "maxlength"),
                          ("pattern", "pattern")):
            if key in spec:
                attrs[attr] = str(spec[key])
    if kind in ("integer", "number"):
        attrs["step"] = "1" if kind == "integer" else "any"
        if "minimum" in spec:
            attrs["min"] = str(spec["minimum"])
        if "maximum" in spec:
            attrs["max"] = str(spec["maximum"])
        if kind == "integer" and "exclusiveMinimum" in spec:
            attrs["min"] = str(int(spec["exclusiveMinimum"]) + 1)
        if kind == "integer" and "exclusiveMaximum" in spec:
            attrs["max"] = str(int(spec["exclusiveMaximum"]) - 1)
    return attrs
