"""The tool authoring API: `@tool`, `Tool`, `ToolContext` and the interrupt signal."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from interlock.domain.models import ToolDefinition


class ToolInterrupt(Exception):
    """Raised by `ToolContext.interrupt`; pauses the turn."""

    def __init__(self, metadata: dict[str, Any] | None) -> None:
        super().__init__("tool interrupted")
        self.metadata = metadata


class SchemaError(ValueError):
    """A value failed a tool's input or output schema."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(errors)} validation error(s)")
        self.errors = errors


@dataclass(frozen=True)
class ToolContext:
    """What a running tool knows about its call."""

    chat_id: str
    ref: str
    attempt: int
    idempotency_key: str
    resumed: dict[str, Any] | None = None
    original_input: Any = None

    @property
    def is_restart(self) -> bool:
        return self.attempt > 1

    def interrupt(self, metadata: dict[str, Any] | None = None) -> NoReturn:
        """Pause the turn and hand this tool request back to the client."""
        raise ToolInterrupt(metadata)


ToolFunction = Callable[[Any, ToolContext], Awaitable[Any]]


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_input=False)
    ]


@dataclass(frozen=True)
class Tool:
    """A typed tool; input and (optional) output are pydantic models."""

    name: str
    description: str
    fn: ToolFunction
    input_model: type[BaseModel]
    output_model: type[BaseModel] | None = None
    side_effects: bool = True
    interrupts: bool = False
    distinct_approver: bool = False

    def validate_input(self, raw: Any) -> BaseModel:
        try:
            return self.input_model.model_validate(raw)
        except ValidationError as exc:
            raise SchemaError(_errors(exc)) from None

    def validate_output(self, raw: Any) -> Any:
        """Check a client-supplied or returned output; return it as JSON data."""
        if self.output_model is None:
            try:
                return to_jsonable_python(raw)
            except PydanticSerializationError as exc:
                raise SchemaError([{"loc": [], "msg": str(exc), "type": "not_json"}]) from None
        try:
            value = self.output_model.model_validate(raw)
        except ValidationError as exc:
            raise SchemaError(_errors(exc)) from None
        return value.model_dump(mode="json")

    @cached_property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name,
            description=self.description,
            input_schema=self.input_model.model_json_schema(),
            output_schema=self.output_model.model_json_schema() if self.output_model else None,
        )

    async def __call__(self, input: BaseModel, ctx: ToolContext) -> Any:
        return await self.fn(input, ctx)


def _signature_models(fn: Callable[..., Any]) -> tuple[type[BaseModel], type[BaseModel] | None]:
    hints = typing.get_type_hints(fn)
    params = list(inspect.signature(fn).parameters)
    if not params or not (
        isinstance(hints.get(params[0]), type) and issubclass(hints[params[0]], BaseModel)
    ):
        raise TypeError(f"tool {fn.__name__}: the first parameter must be a pydantic model")
    output = hints.get("return")
    out_model = output if isinstance(output, type) and issubclass(output, BaseModel) else None
    return hints[params[0]], out_model


def tool(
    name: str | None = None,
    description: str | None = None,
    *,
    side_effects: bool = True,
    interrupts: bool | None = None,
    distinct_approver: bool = False,
) -> Callable[[ToolFunction], Tool]:
    """Make an async function `(input: Model, ctx: ToolContext) -> output` a tool.

    `side_effects=False` lets the runtime run it without committing its request first;
    `distinct_approver=True` refuses a resume by the principal who sent the turn.
    """

    def wrap(fn: ToolFunction) -> Tool:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {fn.__name__} must be an async function")
        input_model, output_model = _signature_models(fn)
        return Tool(
            name=name or fn.__name__,
            description=description or (inspect.getdoc(fn) or "").strip(),
            fn=fn,
            input_model=input_model,
            output_model=output_model,
            side_effects=side_effects,
            interrupts="interrupt" in fn.__code__.co_names if interrupts is None else interrupts,
            distinct_approver=distinct_approver,
        )

    return wrap
