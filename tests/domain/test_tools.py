"""Tool shapes, declared interrupts and interrupt-only tools, without a store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from interlock.api.schemas import ToolPublic
from interlock.domain import ToolContext, interrupt, tool
from interlock.domain.runtime.tools import SchemaError, ToolInterrupt


class Ask(BaseModel):
    question: str


class Answer(BaseModel):
    yes: bool


class Flags(BaseModel):
    interrupt: bool = False


def ctx() -> ToolContext:
    return ToolContext(chat_id="c", ref="r", attempt=1, idempotency_key="c:r:1")


def test_scalar_outputs_list_and_none_inputs_take_any_pydantic_type() -> None:
    """Genkit tools take any schema (js/ai/src/tool.ts `ToolConfig.inputSchema/outputSchema`:
    any zod type, so `z.number()`, `z.array(...)` and `z.void()` work); Interlock reads the
    same from the annotations through pydantic's TypeAdapter."""

    @tool(side_effects=False)
    async def total(input: list[int], ctx: ToolContext) -> int:
        """Add numbers."""
        return sum(input)

    @tool(side_effects=False)
    async def now(input: None, ctx: ToolContext) -> str:
        """The time."""
        return "noon"

    assert total.definition.input_schema == {"items": {"type": "integer"}, "type": "array"}
    assert total.definition.output_schema == {"type": "integer"}
    assert now.definition.input_schema == {"type": "null"}
    assert now.definition.output_schema == {"type": "string"}
    assert total.validate_input(["1", 2]) == [1, 2]
    assert asyncio.run(total(total.validate_input([1, 2]), ctx())) == 3
    assert now.validate_input(None) is None
    assert total.validate_output(3) == 3
    with pytest.raises(SchemaError):
        total.validate_output("three")
    with pytest.raises(SchemaError):
        now.validate_input({"x": 1})


def test_an_unannotated_output_is_only_made_json() -> None:
    @tool()
    async def free(input: Ask, ctx: ToolContext):  # type: ignore[no-untyped-def]
        return Answer(yes=True)

    assert free.output_type is None and free.definition.output_schema is None
    assert free.validate_output(Answer(yes=True)) == {"yes": True}
    assert free.validate_output((1, "a")) == [1, "a"]


def test_a_tool_without_an_input_annotation_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match="annotate the first parameter"):
        @tool()
        async def bare(input, ctx: ToolContext) -> int:  # type: ignore[no-untyped-def]
            return 1


def test_interrupts_are_declared_never_guessed_from_bytecode() -> None:
    """Before, `"interrupt" in fn.__code__.co_names` guessed: a tool reading `input.interrupt`
    was reported as interrupting, one calling a helper that interrupts was not."""
    def ask_first(c: ToolContext) -> None:
        c.interrupt("CONFIRM_ME")

    @tool()
    async def reads_a_field(input: Flags, ctx: ToolContext) -> bool:
        return input.interrupt

    @tool(interrupts=True)
    async def via_helper(input: Ask, ctx: ToolContext) -> Answer:
        ask_first(ctx)
        return Answer(yes=True)

    assert ToolPublic.of(reads_a_field).interrupts is False
    assert ToolPublic.of(via_helper).interrupts is True


def test_an_interrupt_tool_has_schemas_no_body_and_request_metadata() -> None:
    """Genkit's `defineInterrupt` (js/ai/src/tool.ts `interrupt()`): a tool whose body
    always interrupts, with `requestMetadata` an object or a function of the input."""
    fixed = interrupt("confirm", "Ask the user.", input=Ask, output=Answer,
                      metadata={"kind": "yes_no"})
    derived = interrupt("confirm2", "Ask the user.", input=Ask, output=bool,
                        metadata=lambda a: {"asked": a.question})
    public = ToolPublic.of(fixed)
    assert public.interrupts and not public.side_effects
    assert public.input_schema["properties"] == {"question": {"title": "Question",
                                                               "type": "string"}}
    assert public.output_schema is not None and "yes" in public.output_schema["properties"]
    assert derived.definition.output_schema == {"type": "boolean"}
    payloads: list[Any] = []
    for t in (fixed, derived):
        with pytest.raises(ToolInterrupt) as signal:
            asyncio.run(t(t.validate_input({"question": "ok?"}), ctx()))
        payloads.append(signal.value.metadata)
    assert payloads == [{"kind": "yes_no"}, {"asked": "ok?"}]
    assert fixed.validate_output({"yes": True}) == {"yes": True}
    with pytest.raises(SchemaError):
        derived.validate_output("perhaps")
