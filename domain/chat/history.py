"""The history as clients read it: Genkit's interrupt annotations on the recorded messages.

Genkit (js/ai/src/generate/resolve-tool-requests.ts) rewrites the history as a turn pauses
and resumes; Interlock records facts (events) and derives the same annotations when it
answers, so nothing stored changes and every replay reads the same:

- a paused tool request part carries `metadata.interrupt`: the interrupt's payload, or
  `true` when it has none (Genkit: `interrupt: ie.metadata || true`);
- once answered (responded, restarted, approved, rejected, expired or withdrawn) it carries
  `metadata.resolvedInterrupt` instead;
- while its batch waits on an interrupt, a request whose output is already known carries
  `metadata.pendingOutput` (Genkit's `toPendingOutput`);
- the tool message that closes a paused batch carries `metadata.resumed`: the metadata of the
  resume that closed it, or `true` (Genkit: `resumed: resume.metadata || true`), and each
  response part that replays a stashed output carries `metadata.source: "pending"`;
- a response part the client supplied through the respond builder carries
  `metadata.interruptResponse`: the respond's metadata, or `true` when it has none
  (js/ai/src/tool.ts `respondTool`: `interruptResponse: options?.metadata ?? true`); a raw
  `toolResponse` part the client supplied keeps its own metadata and gets none added.

The model is sent the history unannotated: these are for clients, and a provider ignores
part metadata anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.domain.chat.messages import Message, Part
from interlock.domain.chat.state import RESOLVED, ChatState, ToolCall


def history(state: ChatState, since: int = 0) -> list[Message]:
    """`state.messages[since:]`, each tool request and tool message annotated as Genkit does."""
    messages = state.messages
    annotated: list[Message] = []
    for index in range(max(since, 0), len(messages)):
        message = messages[index]
        if message.role == "model" and message.tool_requests:
            closed = index + 1 < len(messages) and messages[index + 1].role == "tool"
            annotated.append(_model_message(message, state.calls, closed))
        elif message.role == "tool" and index > 0 and messages[index - 1].role == "model":
            annotated.append(_tool_message(message, state.calls))
        else:
            annotated.append(message)
    return annotated


def _model_message(message: Message, calls: Mapping[str, ToolCall], closed: bool) -> Message:
    batch = [c for p in message.content if (c := _call_of(p, calls)) is not None]
    paused = any(_was_paused(c) for c in batch)
    if not paused:  # the common case: a round that never paused is returned as recorded
        return message
    parts = []
    for part in message.content:
        call = _call_of(part, calls)
        extra: dict[str, Any] = {}
        if call is not None and call.status == "interrupted":
            extra["interrupt"] = _payload(call)
        elif call is not None and _was_paused(call):
            extra["resolvedInterrupt"] = _payload(call)
        if call is not None and paused and not closed and call.status in RESOLVED:
            extra["pendingOutput"] = call.response_output()
        parts.append(_with_metadata(part, extra))
    return message.replaced(content=parts)


def _tool_message(message: Message, calls: Mapping[str, ToolCall]) -> Message:
    batch = [c for p in message.content if (c := _call_of(p, calls)) is not None]
    paused = [c for c in batch if _was_paused(c)]
    if not paused:
        return message
    parts = [_response_part(p, _call_of(p, calls)) for p in message.content]
    last = max(paused, key=lambda c: c.decided_at or c.requested_at)
    resumed: Any = True if last.resume_metadata is None else last.resume_metadata
    return message.replaced(content=parts,
                            metadata={**(message.metadata or {}), "resumed": resumed})


def _response_part(part: Part, call: ToolCall | None) -> Part:
    """A replayed stash says `source: "pending"`; the client's own answer `interruptResponse`."""
    if call is None:
        return part
    if not _was_paused(call):
        return _with_metadata(part, {"source": "pending"})
    if call.decision == "respond":
        given = call.response_metadata
        return _with_metadata(part, {"interruptResponse": True} if given is None else given)
    return part


def _call_of(part: Part, calls: Mapping[str, ToolCall]) -> ToolCall | None:
    if part.tool_request is not None:
        ref = part.tool_request.ref
    elif part.tool_response is not None:
        ref = part.tool_response.ref
    else:
        return None
    return calls.get(ref) if ref is not None else None


def _was_paused(call: ToolCall) -> bool:
    """It interrupted or was held for approval at some point."""
    return call.interrupted_at is not None


def _payload(call: ToolCall) -> Any:
    return True if call.interrupt is None else call.interrupt


def _with_metadata(part: Part, extra: dict[str, Any]) -> Part:
    if not extra:
        return part
    return part.replaced(metadata={**(part.metadata or {}), **extra})
