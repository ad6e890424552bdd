"""The tool authoring API: `@tool`, `interrupt`, `Tool`, `ToolContext` and the interrupt signal."""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NoReturn

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from interlock.domain.chat.policies import Approval
from interlock.domain.chat.schema import SchemaError as SchemaError  # its old home: re-exported
from interlock.domain.runtime.models import ToolDefinition


class ToolInterrupt(Exception):
    """Raised by `ToolContext.interrupt`; pauses the turn with any JSON value as its payload."""

    def __init__(self, metadata: Any) -> None:
        super().__init__("tool interrupted")
        self.metadata = metadata


class Resumed(dict[str, Any]):
    """A restart's metadata: always truthy, even empty (a bare restart), as in Genkit JS."""

    def __bool__(self) -> bool:
        return True


@dataclass(frozen=True)
class ToolContext:
    """What a running tool knows about its call.

    On a restart, `resumed` is the entry's `resumed_metadata` (truthy even when empty),
    `interrupt_metadata` the payload of the interrupt being answered and `resume_metadata`
    the metadata of the whole resume; on a first run all three are None.
    """

    chat_id: str
    ref: str
    attempt: int
    idempotency_key: str
    resumed: Mapping[str, Any] | None = None
    original_input: Any = None
    interrupt_metadata: Any = None
    resume_metadata: Mapping[str, Any] | None = None
    tenant: str | None = None
    actor: str | None = None  # who sent the turn, or who made the decision that restarted it
    runner: Any = None  # the service running the turn: sub-agents run their chats on it

    @property
    def is_restart(self) -> bool:
        return self.attempt > 1

    def interrupt(self, metadata: Any = None) -> NoReturn:
        """Pause the turn and hand this tool request back to the client.

        `metadata` is any JSON value or pydantic model; only a tool declared
        `interrupts=True` may call this (an undeclared one fails the call).
        """
        raise ToolInterrupt(metadata)


ToolFunction = Callable[[Any, ToolContext], Awaitable[Any]]


def _checked(schema: TypeAdapter[Any], raw: Any, strict: bool) -> Any:
    """`raw` validated against `schema`. What a person decides with (a respond's output, an
    edited or replaced input) is `strict`: JSON types as declared, so `"yes"` is not taken
    for `true` and the log records what was sent; a model's or a tool's own values are
    coerced as pydantic does by default."""
    try:
        if strict:
            return schema.validate_json(_json_text(raw), strict=True)
        return schema.validate_python(raw)
    except ValidationError as exc:
        raise SchemaError(_errors(exc)) from None


def _json_text(raw: Any) -> str:
    """`raw` (JSON data, or a model an in-process caller passed) as JSON text."""
    data = jsonable(raw)  # SchemaError when it has no JSON form
    try:
        return json.dumps(data, allow_nan=False)
    except ValueError:
        raise SchemaError([{"loc": [], "msg": "NaN and infinite numbers are not JSON",
                            "type": "json_invalid"}]) from None


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_input=False)
    ]


def jsonable(value: Any) -> Any:
    """A value (pydantic models included) as JSON data; SchemaError when it has no JSON form."""
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise SchemaError([{"loc": [], "msg": str(exc), "type": "not_json"}]) from None


@dataclass(frozen=True)
class Tool:
    """A typed tool; input and (optional) output are any types pydantic can validate."""

    name: str
    description: str
    fn: ToolFunction
    input_type: Any
    output_type: Any = None  # None: the output is not checked, only made JSON
    side_effects: bool = True
    interrupts: bool = False
    distinct_approver: bool = False
    approval: Approval | None = None  # held for approval before it runs, when it applies
    # What a tool from elsewhere declares about itself (an MCP server's `readOnlyHint`...),
    # and where it comes from (server, version, hash of its tool list): both fingerprinted.
    annotations: Mapping[str, Any] | None = field(default=None, hash=False)
    provenance: Mapping[str, Any] | None = field(default=None, hash=False)

    @cached_property
    def _input(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.input_type)

    @cached_property
    def _output(self) -> TypeAdapter[Any] | None:
        return None if self.output_type is None else TypeAdapter(self.output_type)

    def validate_input(self, raw: Any, *, strict: bool = False) -> Any:
        """The input as the tool's first parameter expects it (`strict`: see `_checked`)."""
        return _checked(self._input, raw, strict)

    def input_json(self, raw: Any, *, strict: bool = False) -> Any:
        """Check an input and return it as JSON data (defaults filled in)."""
        return self._input.dump_python(self.validate_input(raw, strict=strict), mode="json")

    def validate_output(self, raw: Any, *, strict: bool = False) -> Any:
        """Check a client-supplied (`strict`) or returned output; return it as JSON data."""
        if self._output is None:
            return jsonable(raw)
        value = _checked(self._output, raw, strict)
        return self._output.dump_python(value, mode="json")

    @cached_property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name,
            description=self.description,
            input_schema=self._input.json_schema(),
            output_schema=self._output.json_schema() if self._output else None,
        )

    async def __call__(self, input: Any, ctx: ToolContext) -> Any:
        return await self.fn(input, ctx)


def _signature_types(fn: Callable[..., Any]) -> tuple[Any, Any]:
    """The first parameter's type (required) and the return type (None when unannotated)."""
    hints = typing.get_type_hints(fn)
    params = list(inspect.signature(fn).parameters)
    if not params or params[0] not in hints:
        raise TypeError(f"tool {fn.__name__}: annotate the first parameter with the input type")
    output = hints.get("return")
    if output in (Any, NoReturn, typing.Never):
        output = None  # unchecked: the output is only made JSON
    for kind, annotation in (("input", hints[params[0]]), ("output", output)):
        if annotation is not None:
            _check_schema(fn.__name__, kind, annotation)
    return hints[params[0]], output


def _check_schema(name: str, kind: str, annotation: Any) -> None:
    try:
        TypeAdapter(annotation).json_schema()
    except Exception as exc:  # noqa: BLE001 - pydantic raises several kinds for a bad type
        raise TypeError(f"tool {name}: its {kind} type has no JSON schema: {exc}") from None


def tool(
    name: str | None = None,
    description: str | None = None,
    *,
    side_effects: bool = True,
    interrupts: bool = False,
    distinct_approver: bool = False,
    approval: Approval | None = None,
) -> Callable[[ToolFunction], Tool]:
    """Make an async function `(input: T, ctx: ToolContext) -> output` a tool.

    `side_effects=False` lets the runtime run it without committing its request first;
    `interrupts=True` declares that it may call `ctx.interrupt` (an undeclared interrupt
    fails the call); `distinct_approver=True` refuses a resume by the principal who sent
    the turn; `approval=Approval(...)` holds a call for approval before it runs.
    """

    def wrap(fn: ToolFunction) -> Tool:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {fn.__name__} must be an async function")
        input_type, output_type = _signature_types(fn)
        return Tool(
            name=name or fn.__name__,
            description=description or (inspect.getdoc(fn) or "").strip(),
            fn=fn,
            input_type=input_type,
            output_type=output_type,
            side_effects=side_effects,
            interrupts=interrupts,
            distinct_approver=distinct_approver,
            approval=approval,
        )

    return wrap


RequestMetadata = Any  # a JSON value or model, or a function of the input returning one


def interrupt(
    name: str,
    description: str,
    *,
    input: Any,
    output: Any = None,
    metadata: RequestMetadata = None,
    distinct_approver: bool = False,
) -> Tool:
    """A tool with no body that always interrupts (Genkit's `defineInterrupt`).

    The client answers it with `respond` (checked against `output`); `metadata` is the
    interrupt's payload, or a function of the validated input that returns it.
    """

    async def ask(value: Any, ctx: ToolContext) -> NoReturn:
        payload = metadata(value) if callable(metadata) else metadata
        if inspect.isawaitable(payload):
            payload = await payload
        ctx.interrupt(payload)

    for kind, annotation in (("input", input), ("output", output)):
        if annotation is not None:
            _check_schema(name, kind, annotation)
    return Tool(
        name=name,
        description=description,
        fn=ask,
        input_type=input,
        output_type=output,
        side_effects=False,
        interrupts=True,
        distinct_approver=distinct_approver,
    )
