"""The turn loop: call the model, record its reply, run tools, pause on interrupts.

It is given what it needs (an agent, its model, a commit function and a tool budget), so
it knows nothing of the application service that builds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.events import Interrupted, ToolCompleted, ToolFailed, now
from interlock.domain.chat.history import history
from interlock.domain.chat.ids import id_text
from interlock.domain.chat.jsonsafe import UnsafeJsonError, check_json
from interlock.domain.chat.messages import Message, text_message
from interlock.domain.chat.state import ToolCall
from interlock.domain.errors import (
    ConcurrencyError,
    ModelError,
    PolicyMovedError,
    UnavailableError,
)
from interlock.domain.results import StreamEvent, TurnResult
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.gating import InForce, hold_for_approval
from interlock.domain.runtime.middleware import (
    ToolInputError,
    ToolInvocation,
    ToolOutputError,
    call_through,
)
from interlock.domain.runtime.models import Model, ModelChunk, ModelRequest
from interlock.domain.runtime.tools import (
    Resumed,
    SchemaError,
    ToolContext,
    ToolInterrupt,
    jsonable,
)
from interlock.domain.runtime.tracing import Tracer, decision_events, span

Emit = Callable[[StreamEvent], Awaitable[None]]
_T = TypeVar("_T")
_OUTCOMES = (ToolCompleted, ToolFailed, Interrupted)  # what a tool's run records
# The chat's tenant's data policies in force for an agent's tools at a moment (chat, agent,
# at); the service may add a guard to the chat (domain/services/policy_books.py).
DataPolicies = Callable[[Chat, str, datetime], Awaitable[InForce]]
Commit = Callable[[Chat], Awaitable[int | None]]
Outcome = tuple[Literal["completed", "failed", "interrupted"], Any]
# While tools run, a running turn's lease is renewed this often; a turn is retryable
# only after its lease (ABANDONED_AFTER, 2 minutes) passes without an event.
HEARTBEAT_SECONDS = 30.0


@dataclass(frozen=True)
class TurnLoop:
    """Drives one chat from its last recorded step to the end of the turn.

    `max_turns` bounds the tool rounds of this call (a send, a resume or a retry), as
    Genkit's `maxTurns` does: after the last allowed round the model still sees its
    results; a reply that asks for one more round is recorded, its requests answered
    as not run, and the turn ends `max_turns`.
    """

    agent: Agent
    model: Model
    commit: Commit
    max_turns: int
    tracer: Tracer | None = None
    runner: Any = None  # the service, for sub-agents (interlock.domain.runtime.subagents)
    policies: DataPolicies | None = None  # none: the agent's code policies alone
    # Raises if the policies a hold of the chat was judged by (its guards) are no longer in
    # force: called once a round's tools ran, before their outputs reach the stream or the
    # model, with those guards not yet checked by a commit (read-only tools write nothing
    # ahead).
    guards_hold: Callable[[Chat], Awaitable[None]] | None = None
    # Raises ConcurrencyError if another writer appended to the chat after `version` (an
    # erasure's ErasureBegun among them). Called before the model is asked again with no
    # store read or commit since it was last asked (a round of read-only tools): a turn that
    # runs on must not send the chat's data once the chat has moved on elsewhere.
    still_ours: Callable[[Chat, int], Awaitable[None]] | None = None

    async def run(self, chat: Chat, since: int, emit: Emit | None) -> TurnResult:
        """Run the turn; whatever fails in it (but a lost race) ends it `failed`, recorded.
        The answer: what the turn added since message `since` (closing the stream)."""
        return await self._traced(chat, lambda: self._answered(chat, since, emit))

    async def turn(self, chat: Chat, since: int, emit: Emit | None) -> int | None:
        """`run` without its answer (a chat's first turn is answered as the chat): the
        position of its last commit. A stream is left open for the answer's closing events."""
        return await self._traced(chat, lambda: self._run(chat, since, emit))

    async def _answered(self, chat: Chat, since: int, emit: Emit | None) -> TurnResult:
        result = TurnResult.of(chat, since, await self._run(chat, since, emit))
        if emit is not None:
            for event in result.closing_events():  # interrupts only once they are committed
                await emit(event)
        return result

    async def _traced(self, chat: Chat, work: Callable[[], Awaitable[_T]]) -> _T:
        """`work` in the turn's `invoke_agent` span, the stream's closing events with it (an
        emit that fails on them is the span's error, as any failure escaping the turn)."""
        if self.tracer is None:
            return await work()
        with self.tracer.span("invoke_agent", f"invoke_agent {self.agent.name}", {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent.name,
            "gen_ai.conversation.id": str(chat.id),
        }) as turn:
            for event in chat.pending_events:  # the decisions this resume carries
                if (decision := decision_events(event)) is not None:
                    turn.event(*decision)
            done = await work()
            turn.set({"interlock.finish_reason": chat.state.finish_reason or "stop",
                      "interlock.interrupts": len(chat.pending_interrupts())})
            return done

    async def _run(self, chat: Chat, since: int, emit: Emit | None) -> int | None:
        try:
            await self._drive(chat, since, emit)
            return await self.commit(chat)
        except ConcurrencyError:
            raise  # another writer moved the chat on: this copy must record nothing more
        except UnavailableError:
            # The store failed a commit: the turn stays as its last commit left it, retried
            # as after a crash (its lease), not recorded failed by an outage.
            raise
        except Exception as exc:  # noqa: BLE001 - tools, models, emit: no failure may wedge a chat
            chat.finish_turn("failed", error=f"{type(exc).__name__}: {exc}")
            return await self.commit(chat)

    async def _drive(self, chat: Chat, since: int, emit: Emit | None) -> None:
        rounds = 0
        streamed = since  # messages before this index were streamed already, or never will be
        asked_at = None  # the chat's stored version when the model was last asked
        while True:
            runnable = await self._hold(chat)
            if runnable:
                await self._run_tools(chat, runnable, emit)
            if chat.pending_interrupts():
                chat.finish_turn("interrupted")
                return
            if not chat.needs_model():
                chat.finish_turn("stop")
                return
            stored = chat.version - len(chat.pending_events)
            if stored == asked_at and self.still_ours is not None:
                await self.still_ours(chat, stored)
            asked_at = stored
            streamed = await _stream_tool_message(chat, streamed, emit)
            reply = await self._generate(chat, emit)
            if reply is None:
                return
            chat.record_model_reply(*reply)
            if reply[0].tool_requests:
                if rounds >= self.max_turns:
                    self._refuse_round(chat)
                    return
                rounds += 1

    async def _hold(self, chat: Chat) -> list[ToolCall]:
        """Hold the new calls their policies hold (the tenant's data policy in force now
        wins over the code's); the calls that may run now."""
        calls, at = chat.runnable_calls(), now()
        in_force = None
        if self.policies is not None and any(c.status == "requested" for c in calls):
            if self._unsaved_effects(chat):
                await self.commit(chat)  # a commit the policies' guard refuses loses no effect
            in_force = await self.policies(chat, self.agent.name, at)
        return hold_for_approval(chat, self.agent, calls, at, in_force)

    def _unsaved_effects(self, chat: Chat) -> bool:
        """Whether an outcome of a tool that acted is not committed yet."""
        calls = chat.state.calls
        return any(isinstance(e, _OUTCOMES) and e.ref in calls
                   and _has_side_effects(self.agent, calls[e.ref]) for e in chat.pending_events)

    async def _generate(
        self, chat: Chat, emit: Emit | None
    ) -> tuple[Message, dict[str, int] | None] | None:
        """The model's reply, or None once a model failure has finished the turn."""
        with span(self.tracer, "chat", f"chat {self.model.name}", {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": self.model.name,
        }) as call:
            try:
                reply = await self.model.generate(self._request(chat), _chunks(emit))
            except ModelError as exc:
                call.fail("ModelError", str(exc))
                chat.finish_turn("failed", error=str(exc))
                return None
            if reply.usage is not None:
                call.set({"gen_ai.usage.input_tokens": reply.usage.input_tokens,
                          "gen_ai.usage.output_tokens": reply.usage.output_tokens})
        message = reply.message.replaced(role="model")
        try:
            check_json(message.wire(), "the model's reply")
        except UnsafeJsonError as exc:
            chat.finish_turn("failed", error=str(exc))
            return None
        return message, reply.usage.model_dump() if reply.usage else None

    def _refuse_round(self, chat: Chat) -> None:
        """Answer a round past the budget as not run, so the history stays well formed."""
        for call in chat.runnable_calls():
            chat.record_failed(
                call.ref, f"not run: max_turns ({self.max_turns} tool rounds) reached"
            )
        chat.finish_turn("max_turns")

    def _request(self, chat: Chat) -> ModelRequest:
        agent = self.agent
        system: list[Message] = [text_message("system", agent.system)] if agent.system else []
        return ModelRequest(messages=[*system, *chat.state.messages], tools=agent.definitions)

    async def _run_tools(self, chat: Chat, calls: list[ToolCall], emit: Emit | None) -> None:
        if any(_has_side_effects(self.agent, c) for c in calls):
            await self.commit(chat)  # write-ahead: the request is durable before the tool acts
        await _announce(calls, emit)  # after that commit: a lost race streams nothing
        tools = [_traced_tool(self.tracer, chat, self.agent, c, self.runner) for c in calls]
        outcomes = await self._heartbeating(
            chat, asyncio.gather(*tools) if len(tools) > 1 else _alone(tools[0]))
        if chat.guards and self.guards_hold is not None and any(
                kind != "interrupted" for kind, _ in outcomes):
            await self.guards_hold(chat)  # no output goes out judged by a stale book
        for call, (kind, value) in zip(calls, outcomes, strict=True):
            if kind == "completed":
                chat.record_completed(call.ref, value)
            elif kind == "failed":
                chat.record_failed(call.ref, value)
            else:
                chat.record_interrupted(call.ref, value)
            if emit is not None and kind != "interrupted":
                recorded = chat.state.calls[call.ref]
                data = {
                    "ref": call.ref,
                    "name": call.name,
                    "output": recorded.response_output(),
                    "failed": kind == "failed",
                }
                await emit(StreamEvent(type="tool_response", data=data))


    async def _heartbeating(
        self, chat: Chat, tools: Awaitable[list[Outcome]]
    ) -> list[Outcome]:
        """Await the tools while committing a heartbeat every HEARTBEAT_SECONDS.

        Most tools finish long before the first heartbeat is due: a timer stands for the
        heartbeats until then (a task waiting on an event with a timeout cost a short turn
        a task, a future and a cancellation each round), and only a tool still running when
        it fires gets the task that commits them.
        """
        done = asyncio.Event()
        beats: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        timer = loop.call_later(
            HEARTBEAT_SECONDS, lambda: beats.append(loop.create_task(self._beat(chat, done))))
        try:
            return await tools
        finally:
            done.set()
            timer.cancel()
            for beat in beats:
                await beat  # a heartbeat mid-commit finishes before the chat changes again

    async def _beat(self, chat: Chat, done: asyncio.Event) -> None:
        """Commit a heartbeat now (one is due) and every HEARTBEAT_SECONDS until `done`."""
        while not done.is_set():
            chat.heartbeat()
            try:
                await self.commit(chat)
            except PolicyMovedError:
                raise  # nobody else wrote: the turn must not go on past the lost events
            except ConcurrencyError:
                return  # another process retried the turn: this one's last commit will fail
            try:
                await asyncio.wait_for(done.wait(), HEARTBEAT_SECONDS)
                return
            except TimeoutError:
                pass


async def _alone(tool: Awaitable[Outcome]) -> list[Outcome]:
    """A round's one tool, awaited in the turn's own task: gather gave it a task of its own,
    a gathering future and their callbacks (a loop pass more), and the rounds of a cycle
    mostly hold one call. (A context variable a tool sets and never resets is now seen by
    the rest of its turn; Interlock's own, the request's and a span's, are reset.)"""
    return [await tool]


async def _stream_tool_message(chat: Chat, streamed: int, emit: Emit | None) -> int:
    """Stream the tool message the model is about to see, as Genkit streams a `tool` chunk.

    Genkit (js/ai/src/generate/action.ts, `generateHelper`) streams a round's tool message
    before the next model call, and on a resume the rebuilt one (`resumedToolMessage`):
    the responses the resume supplied, the restarted tools' outputs and the stashed ones.
    Interlock sends it whole, annotated as `history` returns it, as a `tool_message` event.
    """
    messages = chat.state.messages
    if emit is not None and len(messages) > streamed and messages[-1].role == "tool":
        [message] = history(chat.state, len(messages) - 1)
        await emit(StreamEvent(type="tool_message", data=message.wire()))
    return len(messages)


def _chunks(emit: Emit | None) -> Callable[[ModelChunk], Awaitable[None]] | None:
    if emit is None:
        return None

    async def on_chunk(chunk: ModelChunk) -> None:
        await emit(StreamEvent(type="text", data={"text": chunk.text}))

    return on_chunk


async def _announce(calls: list[ToolCall], emit: Emit | None) -> None:
    if emit is None:
        return
    for call in calls:
        data = {"ref": call.ref, "name": call.name, "input": call.input}
        await emit(StreamEvent(type="tool_request", data=data))


def _has_side_effects(agent: Agent, call: ToolCall) -> bool:
    tool = agent.tool(call.name)
    return tool is not None and tool.side_effects


def _context(chat: Chat, call: ToolCall, runner: Any) -> ToolContext:
    return ToolContext(
        chat_id=id_text(chat.id),
        ref=call.ref,
        attempt=call.attempt,
        idempotency_key=call.idempotency_key(chat.id),  # a fork's call: its source's key
        resumed=None if call.resumed is None else Resumed(call.resumed),
        original_input=call.original_input,
        interrupt_metadata=call.interrupt,
        resume_metadata=call.resume_metadata,
        tenant=chat.state.tenant,
        actor=call.decided_by if call.decision is not None else chat.state.turn_by,
        runner=runner,
    )


async def _traced_tool(
    tracer: Tracer | None, chat: Chat, agent: Agent, call: ToolCall, runner: Any
) -> Outcome:
    """`_run_tool` in an `execute_tool` span: an interrupt is an event, not an error."""
    if tracer is None:
        return await _run_tool(chat, agent, call, runner)
    with tracer.span("execute_tool", f"execute_tool {call.name}", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.ref,
    }) as run:
        kind, value = await _run_tool(chat, agent, call, runner)
        if kind == "interrupted":
            run.event("interlock.interrupt", {"interlock.interrupt.ref": call.ref})
        elif kind == "failed":
            run.fail("tool_error", str(value))
        return kind, value


async def _run_tool(chat: Chat, agent: Agent, call: ToolCall, runner: Any) -> Outcome:
    tool = agent.tool(call.name)
    if tool is None:
        return "failed", f"unknown tool {call.name!r}"
    invocation = ToolInvocation(tool=tool, input=call.input, ctx=_context(chat, call, runner))
    try:
        output = await call_through(agent.tool_middleware, invocation)
    except ToolInputError as exc:
        return "failed", f"invalid input for {call.name}: {exc.errors}"
    except ToolOutputError as exc:
        return "failed", f"{call.name} returned output that fails its schema: {exc.errors}"
    except ToolInterrupt as signal:
        if not tool.interrupts:
            return "failed", (
                f"{call.name} called ctx.interrupt but is not declared @tool(interrupts=True)"
            )
        return _recordable("interrupted", signal.metadata, f"{call.name}'s interrupt metadata")
    except Exception as exc:  # noqa: BLE001 - a tool's own failure is answered to the model
        return "failed", f"{type(exc).__name__}: {exc}"
    return _recordable("completed", output, f"{call.name}'s output")


def _recordable(kind: Literal["completed", "interrupted"], value: Any, what: str) -> Outcome:
    """A value the log could not hold faithfully fails the call instead of the turn."""
    try:
        value = jsonable(value)  # a pydantic model, a tuple... as the JSON the log holds
        check_json(value, what)
    except SchemaError as exc:
        return "failed", f"{what} is not JSON: {exc.errors[0]['msg']}"
    except UnsafeJsonError as exc:
        return "failed", str(exc)
    return kind, value
