"""The turn loop: call the model, record its reply, run tools, pause on interrupts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from interlock.domain.agent import Agent
from interlock.domain.chat import Chat
from interlock.domain.errors import ModelError
from interlock.domain.jsonsafe import UnsafeJsonError, check_json
from interlock.domain.messages import Message, text_message
from interlock.domain.models import Model, ModelChunk, ModelRequest
from interlock.domain.results import StreamEvent, TurnResult
from interlock.domain.state import ToolCall
from interlock.domain.tools import SchemaError, ToolContext, ToolInterrupt

if TYPE_CHECKING:
    from interlock.domain.application import Interlock

Emit = Callable[[StreamEvent], Awaitable[None]]
Outcome = tuple[Literal["completed", "failed", "interrupted"], Any]


class TurnRunner:
    """Drives a chat from its last recorded step to the end of the turn."""

    def __init__(self, app: Interlock, models: dict[str, Model]) -> None:
        self.app = app
        self.models = models

    async def run(self, chat: Chat, since: int, emit: Emit | None) -> TurnResult:
        agent = self.app.agent(chat.state.agent)
        await self._drive(chat, agent, emit)
        result = TurnResult.of(chat, since, self.app.commit(chat))
        if emit is not None:
            for event in result.closing_events():  # interrupts only once they are committed
                await emit(event)
        return result

    async def _drive(self, chat: Chat, agent: Agent, emit: Emit | None) -> None:
        while True:
            runnable = chat.runnable_calls()
            if runnable:
                await self._run_tools(chat, agent, runnable, emit)
            if chat.pending_interrupts():
                chat.finish_turn("interrupted")
                return
            if not chat.needs_model():
                chat.finish_turn("stop")
                return
            if chat.state.steps >= agent.max_turns:
                chat.finish_turn("max_turns")
                return
            try:
                reply = await self.models[agent.name].generate(
                    self._request(chat, agent), self._chunks(emit)
                )
            except ModelError as exc:
                chat.finish_turn("failed", error=str(exc))
                return
            message = reply.message.model_copy(update={"role": "model"})
            try:
                check_json(message.wire(), "the model's reply")
            except UnsafeJsonError as exc:
                chat.finish_turn("failed", error=str(exc))
                return
            chat.record_model_reply(message, reply.usage.model_dump() if reply.usage else None)

    @staticmethod
    def _request(chat: Chat, agent: Agent) -> ModelRequest:
        system: list[Message] = [text_message("system", agent.system)] if agent.system else []
        return ModelRequest(messages=[*system, *chat.state.messages], tools=agent.definitions)

    @staticmethod
    def _chunks(emit: Emit | None) -> Callable[[ModelChunk], Awaitable[None]] | None:
        if emit is None:
            return None

        async def on_chunk(chunk: ModelChunk) -> None:
            await emit(StreamEvent(type="text", data={"text": chunk.text}))

        return on_chunk

    @staticmethod
    async def _announce(calls: list[ToolCall], emit: Emit | None) -> None:
        if emit is None:
            return
        for call in calls:
            await emit(
                StreamEvent(
                    type="tool_request",
                    data={"ref": call.ref, "name": call.name, "input": call.input},
                )
            )

    async def _run_tools(
        self, chat: Chat, agent: Agent, calls: list[ToolCall], emit: Emit | None
    ) -> None:
        if any(_has_side_effects(agent, c) for c in calls):
            self.app.commit(chat)  # write-ahead: the request is durable before the tool acts
        await self._announce(calls, emit)  # after that commit: a lost race streams nothing
        outcomes = await asyncio.gather(*(_run_tool(chat, agent, c) for c in calls))
        for call, (kind, value) in zip(calls, outcomes, strict=True):
            if kind == "completed":
                chat.record_completed(call.ref, value)
            elif kind == "failed":
                chat.record_failed(call.ref, value)
            else:
                chat.record_interrupted(call.ref, value)
            if emit is not None and kind != "interrupted":
                await emit(
                    StreamEvent(
                        type="tool_response",
                        data={
                            "ref": call.ref,
                            "name": call.name,
                            "output": chat.state.calls[call.ref].response_output(),
                        },
                    )
                )


def _has_side_effects(agent: Agent, call: ToolCall) -> bool:
    tool = agent.tool(call.name)
    return tool is not None and tool.side_effects


async def _run_tool(chat: Chat, agent: Agent, call: ToolCall) -> Outcome:
    tool = agent.tool(call.name)
    if tool is None:
        return "failed", f"unknown tool {call.name!r}"
    try:
        args = tool.validate_input(call.input)
    except SchemaError as exc:
        return "failed", f"invalid input for {call.name}: {exc.errors}"
    ctx = ToolContext(
        chat_id=str(chat.id),
        ref=call.ref,
        attempt=call.attempt,
        idempotency_key=f"{chat.id}:{call.ref}:{call.attempt}",
        resumed=call.resumed,
        original_input=call.original_input,
    )
    try:
        raw = await tool(args, ctx)
    except ToolInterrupt as signal:
        return _recordable("interrupted", signal.metadata, f"{call.name}'s interrupt metadata")
    except Exception as exc:  # noqa: BLE001 - a tool's own failure is answered to the model
        return "failed", f"{type(exc).__name__}: {exc}"
    try:
        output = tool.validate_output(raw)
    except SchemaError as exc:
        return "failed", f"{call.name} returned output that fails its schema: {exc.errors}"
    return _recordable("completed", output, f"{call.name}'s output")


def _recordable(kind: Literal["completed", "interrupted"], value: Any, what: str) -> Outcome:
    """A value the log could not hold faithfully fails the call instead of the turn."""
    try:
        check_json(value, what)
    except UnsafeJsonError as exc:
        return "failed", str(exc)
    return kind, value
