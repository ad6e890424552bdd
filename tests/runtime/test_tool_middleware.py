"""Tool middleware: `Agent(tool_middleware=[...])` wraps every tool call of the agent.

Matches Genkit's tool hook: JS `GenerateMiddlewareDef.tool` (js/ai/src/generate/middleware.ts),
dispatched by `resolveToolRequest` in js/ai/src/generate/resolve-tool-requests.ts (index 0
outermost; `next(modifiedReq)` changes the request; not calling `next` answers instead of the
tool), and Go's `Hooks.WrapTool` (go/ai/middleware.go, `buildToolRunner` in go/ai/generate.go,
composed outer-to-inner). docs/genkit.md has the row.
"""

from __future__ import annotations

from typing import Any

import pytest

from interlock.bootstrap import build_service
from interlock.domain import (
    Agent,
    Approval,
    ApproveEntry,
    Decider,
    FunctionModel,
    Interlock,
    RestartEntry,
    ToolContext,
    ToolInvocation,
    ToolMiddleware,
    ToolNext,
    tool,
)
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.events import ToolCompleted, ToolFailed, ToolRequested
from interlock.domain.runtime.tools import ToolInterrupt
from tests.kit import LookupInput, Script, call, run, say

ran: list[Any] = []


@tool(name="lookup", side_effects=False)
async def lookup(input: LookupInput, ctx: ToolContext) -> str:
    ran.append(input.key)
    return input.key.upper()


@tool(name="boom", side_effects=False)
async def boom(input: LookupInput, ctx: ToolContext) -> str:
    raise RuntimeError(f"boom {input.key}")


@tool(name="pay", approval=Approval())
async def pay(input: LookupInput, ctx: ToolContext) -> str:
    ran.append(("paid", input.key))
    return "paid"


@tool(name="confirm", side_effects=False, interrupts=True)
async def confirm(input: LookupInput, ctx: ToolContext) -> str:
    if not ctx.resumed:
        ctx.interrupt({"sure": input.key})
    return "confirmed"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def app_with(store: str, middleware: list[ToolMiddleware], steps: list[Any]) -> tuple[
    Interlock, Script
]:
    script = Script(steps)
    agent = Agent(name="m", system="", tools=[lookup, boom, pay, confirm],
                  model=FunctionModel(script), tool_middleware=middleware)
    return build_service(store, [agent]), script


def tool_output(script: Script) -> Any:
    return script.requests[-1].messages[-1].content[0].tool_response.output  # type: ignore[union-attr]


def test_middleware_wraps_each_call_first_outermost(store: str) -> None:
    """Genkit JS `dispatch(0, ...)` runs `middleware[0]` first and the tool last; Go composes
    the `WrapTool` hooks outer-to-inner. Each sees the call before and the output after."""
    trace: list[str] = []

    def layer(label: str) -> ToolMiddleware:
        async def wrap(call: ToolInvocation, next: ToolNext) -> Any:
            trace.append(f"{label} before {call.name} {call.input} attempt {call.ctx.attempt}")
            output = await next(call)
            trace.append(f"{label} after {output}")
            return output
        return wrap

    app, _ = app_with(store, [layer("outer"), layer("inner")],
                      [call(("lookup", {"key": "k"}, "l1")), say("ok")])
    chat = app.start_chat("m", actor="alice")
    assert run(app.send(chat.id, "go", actor="alice")).finish_reason == "stop"
    assert trace == ["outer before lookup {'key': 'k'} attempt 1",
                     "inner before lookup {'key': 'k'} attempt 1",
                     "inner after K", "outer after K"]
    assert ran == ["k"]


def test_middleware_may_change_the_input_and_the_change_is_checked(sqlite_store: str) -> None:
    """Genkit JS `next(modifiedReq)`: the tool gets the changed request; the history keeps
    the model's request (the recorded `ToolRequested` input). The tool's input schema is
    checked after the middleware, so a broken change fails the call with the schema's words."""

    async def lower(call: ToolInvocation, next: ToolNext) -> Any:
        key = call.input["key"]
        return await next(call.with_input({"key": key.lower()} if key != "BAD" else [key]))

    app, _ = app_with(sqlite_store, [lower], [
        call(("lookup", {"key": "MiXed"}, "l1")), call(("lookup", {"key": "BAD"}, "l2")),
        say("ok")])
    chat = app.start_chat("m", actor="alice")
    run(app.send(chat.id, "go", actor="alice"))
    assert ran == ["mixed"]
    events = app.chat_events(chat.id)
    assert [e.input for e in events if isinstance(e, ToolRequested)] == [
        {"key": "MiXed"}, {"key": "BAD"}]
    assert [e.output for e in events if isinstance(e, ToolCompleted)] == ["MIXED"]
    [failed] = [e for e in events if isinstance(e, ToolFailed)]
    assert failed.ref == "l2" and failed.error.startswith("invalid input for lookup")


def test_middleware_may_answer_without_running_the_tool(store: str) -> None:
    """Genkit JS: a `tool` hook that returns without calling `next` answers for the tool
    (caching, overrides). The answer is recorded as the call's output after the tool's
    output schema checks it; one that fails the schema fails the call, not the turn."""

    async def cached(call: ToolInvocation, next: ToolNext) -> Any:
        if call.input["key"] == "hit":
            return "FROM CACHE"
        if call.input["key"] == "wrong":
            return {"not": "a string"}
        return await next(call)

    app, _ = app_with(store, [cached], [
        call(("lookup", {"key": "hit"}, "l1")), call(("lookup", {"key": "wrong"}, "l2")),
        say("ok")])
    chat = app.start_chat("m", actor="alice")
    done = run(app.send(chat.id, "go", actor="alice"))
    assert done.finish_reason == "stop" and ran == []
    events = app.chat_events(chat.id)
    assert [e.output for e in events if isinstance(e, ToolCompleted)] == ["FROM CACHE"]
    [failed] = [e for e in events if isinstance(e, ToolFailed)]
    assert "returned output that fails its schema" in failed.error


def test_middleware_sees_a_tools_exception_and_may_answer_it(sqlite_store: str) -> None:
    """Genkit JS/Go: the tool's error propagates back through each hook, which may catch it.
    One that escapes every middleware fails the call and the model is told, as without any."""
    seen: list[str] = []

    async def observe(call: ToolInvocation, next: ToolNext) -> Any:
        try:
            return await next(call)
        except RuntimeError as exc:
            seen.append(str(exc))
            raise

    async def fallback(call: ToolInvocation, next: ToolNext) -> Any:
        try:
            return await next(call)
        except RuntimeError:
            if call.input["key"] == "soft":
                return "fallback"
            raise

    app, script = app_with(sqlite_store, [observe, fallback], [
        call(("boom", {"key": "soft"}, "b1")), call(("boom", {"key": "hard"}, "b2")),
        say("ok")])
    chat = app.start_chat("m", actor="alice")
    run(app.send(chat.id, "go", actor="alice"))
    assert seen == ["boom hard"]  # the inner fallback answered the first one
    events = app.chat_events(chat.id)
    assert [e.output for e in events if isinstance(e, ToolCompleted)] == ["fallback"]
    [failed] = [e for e in events if isinstance(e, ToolFailed)]
    assert failed.error == "RuntimeError: boom hard"
    assert tool_output(script) == {"error": "RuntimeError: boom hard"}


def test_approvals_hold_a_call_before_middleware_and_interrupts_pass_through(store: str) -> None:
    """A held call (an `Approval`) is decided before it runs, so middleware never sees a
    call that was not approved and sees the approved one once. An interrupt passes through
    middleware as in Genkit (`ToolInterruptError` is thrown through the `dispatch` chain),
    and the restart runs through it again with `ctx.resumed` set."""
    trace: list[tuple[str, Any]] = []

    async def record(call: ToolInvocation, next: ToolNext) -> Any:
        trace.append((call.name, call.ctx.resumed))
        try:
            return await next(call)
        except ToolInterrupt:
            trace.append(("raised", "ToolInterrupt"))
            raise

    app, _ = app_with(store, [record], [
        call(("pay", {"key": "p"}, "p1")), call(("confirm", {"key": "c"}, "c1")), say("ok")])
    chat = app.start_chat("m", actor="alice")
    held = run(app.send(chat.id, "go", actor="alice"))
    assert held.interrupts[0].approval is not None and trace == [] and ran == []
    paused = run(app.resume(chat.id, actor="bob", votes=[ApproveEntry(ref="p1", name="pay")],
                            decider=Decider("bob", frozenset({"approver"}))))
    assert ran == [("paid", "p")] and paused.interrupts[0].ref == "c1"
    done = run(app.resume(chat.id, actor="bob", restart=[RestartEntry(ref="c1", name="confirm")]))
    assert done.finish_reason == "stop"
    assert trace == [("pay", None), ("confirm", None), ("raised", "ToolInterrupt"),
                     ("confirm", {})]


def test_middleware_is_part_of_the_agents_fingerprint_only_when_present() -> None:
    """An agent's recorded fingerprint says when what decides its behaviour changed; adding
    middleware changes it, and agents without any keep the fingerprint they had."""

    async def noop(call: ToolInvocation, next: ToolNext) -> Any:
        return await next(call)

    model = FunctionModel(Script([]))
    plain = Agent(name="m", system="", tools=[lookup], model=model)
    wrapped = Agent(name="m", system="", tools=[lookup], model=model, tool_middleware=[noop])
    tools = [{**lookup.definition.model_dump(mode="json"), "approval": None}]
    assert plain.fingerprint == sha256_hex({"system": "", "model": model.name, "tools": tools})
    assert wrapped.fingerprint != plain.fingerprint
