"""HTML forms from a tool's JSON schema: one labelled input per value, nested as the schema is.

Strings, numbers, booleans and enums become inputs carrying the schema's constraints as HTML
attributes (the browser checks them before submit); an optional or nullable value may be left
blank; objects are fieldsets and arrays are fieldsets of rows. Only a truly free-form value
(no type, an object without properties, a union) is typed as JSON. The server validates the
value again against the tool's schema either way (forms_parse.py turns the fields back).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

FieldKind = Literal["text", "integer", "number", "boolean", "tristate", "choice", "object",
                    "array", "json"]
_SCALARS: dict[str, FieldKind] = {"string": "text", "integer": "integer", "number": "number",
                                  "boolean": "boolean"}
_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date", "time": "time"}
JSON_FIELD = "__json__"
MAX_DEPTH = 6  # a recursive schema is typed as JSON below this


@dataclass(frozen=True)
class FormField:
    """One input (or fieldset) of a generated form; `name` is its key in the parent."""

    name: str
    label: str
    kind: FieldKind
    required: bool
    nullable: bool = False
    description: str = ""
    default: Any = None
    options: tuple[tuple[str, Any], ...] = ()  # (what the option says, the JSON value)
    attrs: dict[str, str] = field(default_factory=dict)  # HTML constraints
    fields: tuple[FormField, ...] = ()  # an object's
    item: FormField | None = None  # an array's rows

    @property
    def input_type(self) -> str:
        if self.kind in ("integer", "number"):
            return "number"
        return self.attrs.get("data-format", "text")

    @property
    def optional(self) -> bool:
        """Blank is a valid answer: the value is left out (its default) or null."""
        return not self.required or self.nullable


@dataclass(frozen=True)
class SchemaForm:
    """The inputs of one form; `fields` is None when the whole value is edited as JSON.

    `decision` names a required boolean drawn as two buttons (Approve / Decline) instead of
    a checkbox: a respond whose answer is a yes or a no.
    """

    fields: tuple[FormField, ...] | None
    schema: dict[str, Any]
    decision: str | None = None

    def others(self) -> tuple[FormField, ...]:
        """The fields drawn beside the decision's buttons."""
        return tuple(f for f in self.fields or () if f.name != self.decision)


def schema_form(schema: dict[str, Any] | None, *, decide: bool = False) -> SchemaForm:
    """A form for `schema` (None: any JSON value); `decide`: a yes/no answer gets buttons."""
    schema = schema or {}
    target = _resolve(schema, schema)
    if target.get("type") != "object" or not isinstance(target.get("properties"), dict):
        return SchemaForm(None, schema)
    fields = _object_fields(target, schema, 0)
    if not fields:
        return SchemaForm(None, schema)
    return SchemaForm(fields, schema, _decision(fields) if decide else None)


def _decision(fields: tuple[FormField, ...]) -> str | None:
    yes_no = [f.name for f in fields if f.kind == "boolean" and f.required and not f.nullable]
    return yes_no[0] if len(yes_no) == 1 else None


def _object_fields(spec: dict[str, Any], root: dict[str, Any], depth: int) -> tuple[FormField, ...]:
    required = set(spec.get("required", ()))
    return tuple(_field(name, sub, root, name in required, depth)
                 for name, sub in spec.get("properties", {}).items() if isinstance(sub, dict))


def _resolve(spec: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        outer = {k: v for k, v in spec.items() if k != "$ref"}
        return {**target, **outer, "title": outer.get("title")}  # a field's title, not its type's
    return spec


def _unwrap(spec: dict[str, Any], root: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The spec without its `null` alternative, and whether null is allowed."""
    spec = _resolve(spec, root)
    types = spec.get("type")
    if isinstance(types, list) and "null" in types:
        rest = [t for t in types if t != "null"]
        return {**spec, "type": rest[0] if len(rest) == 1 else rest}, True
    options = spec.get("anyOf") or spec.get("oneOf")
    if isinstance(options, list):
        real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        if len(real) == 1 and len(options) == 2:
            outer = {k: v for k, v in spec.items() if k not in ("anyOf", "oneOf")}
            inner = _resolve(real[0], root)
            return {**inner, **outer, "title": outer.get("title")}, True
    return spec, False


def _field(name: str, raw: dict[str, Any], root: dict[str, Any], required: bool,
           depth: int) -> FormField:
    spec, nullable = _unwrap(raw, root)
    base = FormField(name=name, label=str(spec.get("title") or _humane(name)), kind="json",
                     required=required, nullable=nullable,
                     description=str(spec.get("description", "")), default=spec.get("default"))
    if depth >= MAX_DEPTH:
        return base
    if isinstance(spec.get("enum"), list) or "const" in spec:
        values = spec["enum"] if isinstance(spec.get("enum"), list) else [spec["const"]]
        return replace(base, kind="choice", options=tuple((str(v), v) for v in values))
    kind = spec.get("type")
    if kind == "object" and isinstance(spec.get("properties"), dict) and spec["properties"]:
        return replace(base, kind="object", fields=_object_fields(spec, root, depth + 1))
    if kind == "array" and isinstance(spec.get("items"), dict):
        item = _field("", spec["items"], root, True, depth + 1)
        return replace(base, kind="array", item=replace(item, label=base.label))
    if isinstance(kind, str) and kind in _SCALARS:
        scalar = _SCALARS[kind]
        if scalar == "boolean" and nullable:
            scalar = "tristate"  # yes, no, or not said
        return replace(base, kind=scalar, attrs=_constraints(scalar, spec))
    return base


def _humane(name: str) -> str:
    words = name.replace("_", " ").strip()
    return words[:1].upper() + words[1:] if words else "Value"


def _constraints(kind: FieldKind, spec: dict[str, Any]) -> dict[str, str]:
    """HTML validation attributes equivalent to the schema's (the server checks the rest)."""
    attrs: dict[str, str] = {}
    if kind == "text":
        for key, attr in (("minLength", "minlength"), ("maxLength", "maxlength"),
                          ("pattern", "pattern")):
            if key in spec:
                attrs[attr] = str(spec[key])
        if spec.get("format") in _INPUT_TYPES:
            attrs["data-format"] = _INPUT_TYPES[spec["format"]]
    if kind in ("integer", "number"):
        attrs["step"] = "1" if kind == "integer" else "any"
        for key, attr in (("minimum", "min"), ("maximum", "max")):
            if key in spec:
                attrs[attr] = _number(spec[key])
        if kind == "integer" and "exclusiveMinimum" in spec:
            attrs["min"] = str(int(spec["exclusiveMinimum"]) + 1)
        if kind == "integer" and "exclusiveMaximum" in spec:
            attrs["max"] = str(int(spec["exclusiveMaximum"]) - 1)
    return attrs


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
