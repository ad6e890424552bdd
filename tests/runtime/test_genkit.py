"""Genkit's interrupt model through the service: payloads, failures, budgets, resume metadata.

Each test names the Genkit source it matches (firebase/genkit at 77656d5, genkit-ai/genkit-dart
at 9094104) or the deliberate difference; docs/genkit.md has the whole table.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from interlock.bootstrap import build_service
from interlock.domain import (
    Agent,
    FunctionModel,
    Interlock,
    ModelRequest,
    ModelResponse,
    RespondEntry,
    RestartEntry,
    StreamEvent,
    ToolContext,
    interrupt,
    tool,
)
from interlock.domain.errors import InvalidRequestError, InvalidToolOutputError
from interlock.projections import open_read_models
from interlock.projections.interface import InboxFilter
from interlock.providers import anthropic_wire
from tests.kit import ApprovalInput, LookupInput, Script, call, run, say


class Choice(BaseModel):
    option: str


def app_with(store: str, tools: list[Any], steps: list[Any], max_turns: int = 5) -> tuple[
    Interlock, Script
]:
    script = Script(steps)
    agent = Agent(name="g", system="", tools=tools, model=FunctionModel(script),
                  max_turns=max_turns)
    return build_service(store, [agent]), script


def types(app: Interlock, chat_id: Any) -> list[str]:
    return [type(e).__name__ for e in app.chat_events(chat_id)]


@pytest.mark.parametrize(("payload", "recorded"), [
    ("CONFIRM_ME", "CONFIRM_ME"),
    (Choice(option="a"), {"option": "a"}),
    (["a", "b"], ["a", "b"]),
    (3, 3),
    (None, None),
])
def test_any_json_value_or_model_is_an_interrupt_payload(
    sqlite_store: str, payload: Any, recorded: Any
) -> None:
    """Genkit Dart's `ctx.interrupt([dynamic data])` (packages/genkit/lib/src/ai/tool.dart)
    takes any value; JS/Go/Python take an object. Interlock takes any JSON value or model,
    records its JSON, and the inbox holds it as given."""

    @tool(name="ask", side_effects=False, interrupts=True)
    async def ask(input: LookupInput, ctx: ToolContext) -> str:
        ctx.interrupt(payload)

    app, _ = app_with(sqlite_store, [ask], [call(("ask", {"key": "k"})), say("thanks")])
    views = open_read_models(app)
    try:
        chat = app.start_chat("g", actor="alice")
        sent = run(app.send(chat.id, "go", actor="alice"))
        assert sent.finish_reason == "interrupted" and sent.interrupts[0].metadata == recorded
        views.wait(sent.position)
        [row] = views.inbox(InboxFilter(), limit=10).items
        assert row.metadata == recorded
        [pending] = sent.interrupts
        done = run(app.resume(chat.id, actor="bob", respond=[
            RespondEntry(ref=pending.ref, name="ask", output="yes")]))
        assert done.finish_reason == "stop" and done.text == "thanks"
    finally:
        views.close()


def test_an_unrecordable_interrupt_payload_fails_the_call_not_the_turn(sqlite_store: str) -> None:
    @tool(name="ask", side_effects=False, interrupts=True)
    async def ask(input: LookupInput, ctx: ToolContext) -> str:
        ctx.interrupt(object())

    app, script = app_with(sqlite_store, [ask], [call(("ask", {"key": "k"})), say("ok")])
    chat = app.start_chat("g", actor="alice")
    done = run(app.send(chat.id, "go", actor="alice"))
    assert done.finish_reason == "stop"
    error = script.requests[-1].messages[-1].content[0].tool_response.output  # type: ignore[union-attr]
    assert "ask's interrupt metadata is not JSON" in error["error"]


def test_an_undeclared_interrupt_fails_the_call_and_says_how_to_declare_it(
    sqlite_store: str,
) -> None:
    """Deliberate difference: Genkit lets any tool interrupt (js/ai/src/tool.ts
    `interruptTool`). Interlock makes it a declaration, so `GET /v1/agents` can say which
    tools may pause, truthfully; an interrupt the tool did not declare fails the call."""

    def helper(ctx: ToolContext) -> None:
        ctx.interrupt({"why": "helper"})

    @tool(name="sneaky", side_effects=False)
    async def sneaky(input: LookupInput, ctx: ToolContext) -> str:
        helper(ctx)
        return "never"

    app, script = app_with(sqlite_store, [sneaky], [call(("sneaky", {"key": "k"})), say("ok")])
    chat = app.start_chat("g", actor="alice")
    done = run(app.send(chat.id, "go", actor="alice"))
    assert done.finish_reason == "stop" and done.interrupts == []
    part = script.requests[-1].messages[-1].content[0]
    assert part.metadata == {"failed": True}
    assert "not declared @tool(interrupts=True)" in part.tool_response.output["error"]  # type: ignore[union-attr]


def test_a_tool_whose_real_output_is_an_error_shaped_dict_succeeds(sqlite_store: str) -> None:
    """Genkit marks nothing by shape: a tool's output is passed on as is (resolve-tool-requests.ts
    `executeTool`). Interlock flags failures in the tool response part's metadata
    (`{"failed": true}`), so `{"error": "x"}` returned by a tool is an ordinary success."""

    @tool(name="check", side_effects=False)
    async def check(input: LookupInput, ctx: ToolContext) -> dict[str, str]:
        return {"error": "x"}

    @tool(name="broken", side_effects=False)
    async def broken(input: LookupInput, ctx: ToolContext) -> dict[str, str]:
        raise ValueError("x")

    app, script = app_with(sqlite_store, [check, broken],
                           [call(("check", {"key": "k"}), ("broken", {"key": "k"})), say("ok")])
    chat = app.start_chat("g", actor="alice")
    streamed: list[StreamEvent] = []

    async def emit(event: StreamEvent) -> None:
        streamed.append(event)

    run(app.send(chat.id, "go", actor="alice", emit=emit))
    assert types(app, chat.id).count("ToolCompleted") == 1
    assert types(app, chat.id).count("ToolFailed") == 1
    tool_message = script.requests[-1].messages[-1]
    ok, failed = tool_message.content
    assert ok.tool_response.output == {"error": "x"} and ok.metadata is None  # type: ignore[union-attr]
    assert failed.metadata == {"failed": True}
    blocks = anthropic_wire.to_messages(script.requests[-1].messages)[-1]["content"]
    assert [b.get("is_error", False) for b in blocks] == [False, True]  # type: ignore[union-attr]
    responses = [e.data for e in streamed if e.type == "tool_response"]
    assert [(r["name"], r["failed"]) for r in responses] == [("check", False), ("broken", True)]


def test_each_resume_starts_a_fresh_tool_budget(store: str) -> None:
    """Genkit runs each resume as a new generate call with `currentTurn: 0`
    (js/ai/src/generate/action.ts, the generate action's `currentTurn: 0`), so one approval
    per step never runs out. Before, one budget covered a turn and all its resumes."""

    @tool(name="approve", side_effects=False, interrupts=True)
    async def approve(input: ApprovalInput, ctx: ToolContext) -> bool:
        ctx.interrupt({"step": input.action})

    steps = [call(("approve", {"action": str(i)})) for i in range(4)] + [say("all approved")]
    app, script = app_with(store, [approve], steps, max_turns=1)
    chat = app.start_chat("g", actor="alice")
    result = run(app.send(chat.id, "go", actor="alice"))
    for _ in range(4):
        assert result.finish_reason == "interrupted"
        [pending] = result.interrupts
        result = run(app.resume(chat.id, actor="bob", respond=[
            RespondEntry(ref=pending.ref, name="approve", output=True)]))
    assert result.finish_reason == "stop" and result.text == "all approved"
    assert script.requests[-1].messages[-1].role == "tool"  # the last decision was seen


def test_max_turns_per_send_and_per_resume_override_the_agents(sqlite_store: str) -> None:
    """Genkit takes `maxTurns` per generate call (js/ai/src/generate/action.ts
    `rawRequest.maxTurns ?? 5`); Interlock takes it per send, resume and retry."""

    @tool(name="lookup", side_effects=False)
    async def lookup(input: LookupInput, ctx: ToolContext) -> str:
        return input.key

    @tool(name="approve", side_effects=False, interrupts=True)
    async def approve(input: ApprovalInput, ctx: ToolContext) -> bool:
        ctx.interrupt()

    looping = [call(("lookup", {"key": str(i)})) for i in range(20)]
    app, script = app_with(sqlite_store, [lookup, approve],
                           [*looping[:3], call(("approve", {"action": "a"})), *looping[3:]],
                           max_turns=5)
    chat = app.start_chat("g", actor="alice")
    version = app.get_chat(chat.id).version
    with pytest.raises(InvalidRequestError, match="max_turns"):
        run(app.send(chat.id, "go", actor="alice", max_turns=0))
    assert app.get_chat(chat.id).version == version  # refused before anything was written
    first = run(app.send(chat.id, "go", actor="alice", max_turns=2))
    assert first.finish_reason == "max_turns" and len(script.requests) == 3
    second = run(app.send(chat.id, "more", actor="alice", max_turns=3))
    assert second.finish_reason == "interrupted"
    [pending] = second.interrupts
    before = len(script.requests)
    third = run(app.resume(chat.id, actor="bob", max_turns=1, respond=[
        RespondEntry(ref=pending.ref, name="approve", output=True)]))
    assert third.finish_reason == "max_turns" and len(script.requests) - before == 2


def test_restarted_tools_see_resumed_metadata_and_the_interrupt_they_answer(store: str) -> None:
    """Genkit JS `restartTool` (js/ai/src/tool.ts) sets `resumed: resumedMetadata ?? true` and
    keeps the interrupt's metadata on the request, which the tool reads via `ToolRunOptions`
    (`resumed`, `metadata.interrupt`). Interlock: `ctx.resumed` (truthy even for a bare
    restart), `ctx.interrupt_metadata`, and `ctx.resume_metadata` for the resume's own
    metadata (Genkit's `resume.metadata`, which its tools cannot read)."""
    seen: list[ToolContext] = []

    @tool(name="deploy", interrupts=True)
    async def deploy(input: LookupInput, ctx: ToolContext) -> str:
        seen.append(ctx)
        if len(seen) < 3:
            ctx.interrupt({"round": len(seen)})
        return "shipped"

    app, _ = app_with(store, [deploy], [call(("deploy", {"key": "k"})), say("done")])
    chat = app.start_chat("g", actor="alice")
    [pending] = run(app.send(chat.id, "go", actor="alice")).interrupts
    [pending] = run(app.resume(chat.id, actor="bob", metadata={"ticket": 7},
                               restart=[RestartEntry(ref=pending.ref, name="deploy")])).interrupts
    done = run(app.resume(chat.id, actor="bob", restart=[
        RestartEntry(ref=pending.ref, name="deploy", resumed_metadata={"ok": True})]))
    assert done.finish_reason == "stop"
    first, bare, with_metadata = seen
    assert first.resumed is None and first.interrupt_metadata is None
    assert bare.resumed == {} and bool(bare.resumed) and bare.interrupt_metadata == {"round": 1}
    assert bare.resume_metadata == {"ticket": 7} and bare.attempt == 2
    assert with_metadata.resumed == {"ok": True} and with_metadata.resume_metadata is None
    assert with_metadata.interrupt_metadata == {"round": 2}
    restarts = [e for e in app.chat_events(chat.id) if type(e).__name__ == "Restarted"]
    assert [e.resume_metadata for e in restarts] == [{"ticket": 7}, None]  # type: ignore[attr-defined]


def test_an_interrupt_tool_is_answered_against_its_output_schema(sqlite_store: str) -> None:
    """Genkit's `defineInterrupt` (js/ai/src/tool.ts): no body, `requestMetadata` from the
    input, and the reply is the tool's output (its `respond` checks the output schema)."""
    confirm = interrupt("confirm", "Ask the user to pick.", input=ApprovalInput, output=Choice,
                        metadata=lambda a: {"asked": a.action})

    def reply(request: ModelRequest) -> ModelResponse:
        return say(f"picked {request.last.content[0].tool_response.output['option']}")  # type: ignore[union-attr]

    app, _ = app_with(sqlite_store, [confirm], [call(("confirm", {"action": "color"})), reply])
    chat = app.start_chat("g", actor="alice")
    [pending] = run(app.send(chat.id, "go", actor="alice")).interrupts
    assert pending.metadata == {"asked": "color"}
    with pytest.raises(InvalidToolOutputError):
        run(app.resume(chat.id, actor="bob", respond=[
            RespondEntry(ref=pending.ref, name="confirm", output={"colour": "red"})]))
    done = run(app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=pending.ref, name="confirm", output={"option": "red"})]))
    assert done.text == "picked red"
