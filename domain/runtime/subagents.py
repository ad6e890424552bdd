"""Sub-agents: an agent used as a tool of another, in a chat of its own.

`agent_tool("researcher", "...")` is a tool of the parent agent; the service must run both
agents. A call starts a chat with the sub-agent (tenant and actor of the parent's turn,
`metadata.parent = {"chat_id", "ref", "agent"}`), sends it the model's `message` and answers
the sub-agent's final text. Every step of the sub-agent is an event of its own chat, so its
replay, `verify`, inbox rows and decision log are those of any chat.

When the sub-agent pauses, the parent's call pauses too: the parent chat's interrupt for
that call carries `{"subagent": {"agent", "chat_id", "interrupts": [...]}}`, the sub-agent's
pending interrupts as the API shows them. Resume it on the parent by restarting that call
with the sub-agent's decisions in `resumed_metadata`:

    RestartEntry(ref=parent_ref, name="researcher", resumed_metadata={
        "respond": [{"ref": ..., "name": ..., "output": ...}],
        "restart": [{"ref": ..., "name": ..., "resumed_metadata": {...}}]})

The restarted call resumes the sub-agent's chat with them (by the parent's decider, with the
parent resume's metadata) and answers its text, or pauses again with its new interrupts. A
decision the sub-agent refuses (a wrong ref, an output off its schema) pauses the parent
call again with the refusal in `subagent.error`, so nothing is lost and the client retries.
A bare restart picks up a sub-agent chat that was resumed directly.

Genkit JS's nearest feature is a prompt tool, which transfers the conversation itself
(`resolveToolRequest`, `transferPreamble` in js/ai/src/generate/resolve-tool-requests.ts);
Interlock gives the sub-agent a chat of its own instead (docs/genkit.md).
"""

from __future__ import annotations

from typing import Any, NoReturn
from uuid import UUID, uuid5

from pydantic import BaseModel, Field, ValidationError

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.rules import RespondEntry, RestartEntry
from interlock.domain.errors import ConcurrencyError, InterlockError
from interlock.domain.results import TurnResult
from interlock.domain.runtime.tools import Tool, ToolContext

_CHILDREN = UUID("6d1c2f4e-6c39-5b1e-9a3e-2f8f3c1b7a10")  # namespace of sub-agent chat ids


class SubAgentInput(BaseModel):
    message: str = Field(min_length=1, description="What to ask the sub-agent")


class SubAgentError(RuntimeError):
    """The sub-agent's turn failed or stopped short; the parent's model is told why."""


def agent_tool(agent: str, description: str, *, name: str | None = None) -> Tool:
    """A tool that hands `message` to the agent named `agent`, in a chat of its own."""
    tool_name = name or agent

    async def delegate(input: SubAgentInput, ctx: ToolContext) -> str:
        runner = ctx.runner
        if runner is None:
            raise SubAgentError(f"{tool_name} runs only inside an Interlock service")
        if ctx.resumed is None:
            return _answer(ctx, agent, *await _delegate(runner, ctx, agent, input.message))
        child_id = UUID(_subagent(ctx)["chat_id"])
        try:
            respond = [RespondEntry.model_validate(e) for e in ctx.resumed.get("respond", [])]
            restart = [RestartEntry.model_validate(e) for e in ctx.resumed.get("restart", [])]
        except ValidationError as exc:
            _pause(ctx, agent, child_id, _latest(runner, child_id).interrupts,
                   f"the sub-agent's decisions are malformed: {exc.errors(include_url=False)}")
        if not respond and not restart:  # resumed on its own chat meanwhile, or not at all
            return _answer(ctx, agent, child_id, _latest(runner, child_id))
        try:
            result = await runner.resume(
                child_id, respond=respond, restart=restart, actor=ctx.actor or "system",
                metadata=dict(ctx.resume_metadata) if ctx.resume_metadata else None)
        except InterlockError as exc:  # refused: pause again, saying why
            _pause(ctx, agent, child_id, _latest(runner, child_id).interrupts, str(exc))
        return _answer(ctx, agent, child_id, result)

    return Tool(
        name=tool_name,
        description=description,
        fn=delegate,
        input_type=SubAgentInput,
        output_type=str,
        side_effects=True,
        interrupts=True,
    )


async def _delegate(
    runner: Any, ctx: ToolContext, agent: str, message: str
) -> tuple[UUID, TurnResult]:
    """Start the sub-agent's chat and send it `message`; or, when this very call runs again
    (a retried turn: same idempotency key), carry on with the chat it started then.

    The child's id is derived from the call's idempotency key, so a retry finds the chat
    instead of starting a second one (the store refuses a second ChatStarted for an id).
    """
    actor = ctx.actor or "system"
    child_id = uuid5(_CHILDREN, ctx.idempotency_key)
    try:
        runner.start_chat(
            agent, actor=actor, tenant=ctx.tenant or "default", chat_id=child_id,
            metadata={"parent": {"chat_id": ctx.chat_id, "ref": ctx.ref, "agent": agent}})
    except ConcurrencyError:
        child = runner.get_chat(child_id)
        if child.state.messages:  # it got the message before the parent's turn stopped
            if child.state.status in ("running", "failed"):
                return child_id, await runner.retry(child_id, actor=actor)
            return child_id, _latest(runner, child_id)
    return child_id, await runner.send(child_id, message, actor=actor)


def children_of(chat: Chat) -> list[UUID]:
    """The ids a sub-agent chat started by one of this chat's calls would have (most of
    its calls start none): a call's runs are keyed by chat, ref and attempt. A fork's call
    asked in its source keeps the source's key, and the source's chat: it is not the fork's."""
    return [uuid5(_CHILDREN, call.idempotency_key(chat.id, attempt))
            for call in chat.state.calls.values() if call.idempotency_chat() is None
            for attempt in range(1, call.attempt + 1)]


def _answer(ctx: ToolContext, agent: str, child_id: UUID, result: Any) -> str:
    if result.finish_reason == "interrupted":
        _pause(ctx, agent, child_id, result.interrupts, None)
    if result.finish_reason == "failed":
        raise SubAgentError(f"sub-agent {agent} failed: {result.error}")
    text: str = result.text
    return text


def _pause(ctx: ToolContext, agent: str, child_id: UUID, interrupts: list[Any],
           error: str | None) -> NoReturn:
    payload: dict[str, Any] = {
        "agent": agent, "chat_id": str(child_id),
        "interrupts": [i.model_dump(mode="json") for i in interrupts],
    }
    if error is not None:
        payload["error"] = error
    ctx.interrupt({"subagent": payload})


def _subagent(ctx: ToolContext) -> dict[str, Any]:
    metadata = ctx.interrupt_metadata
    if not isinstance(metadata, dict) or "subagent" not in metadata:
        raise SubAgentError("this call has no sub-agent chat to resume")
    found: dict[str, Any] = metadata["subagent"]
    return found


def _latest(runner: Any, child_id: UUID) -> TurnResult:
    """The sub-agent chat's state now, as a turn result (its last text, its interrupts)."""
    return TurnResult.of(runner.get_chat(child_id), 0, None)
