"""What happened to a decided call, and what the agent did next, in words.

Read from the chat's state alone, so it reads the same for the person who decided, for a
colleague who opens the page later, and for a decision made elsewhere (the API, the sweeper's
expiry, a withdrawal).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from interlock.domain.chat.messages import Message
from interlock.domain.chat.state import ToolCall


@dataclass(frozen=True)
class Outcome:
    """`happened`: the decision; `then`: what the tool and the agent did; `reply`: its words."""

    happened: str
    then: str
    reply: str | None
    waiting_on: tuple[ToolCall, ...] = ()  # calls the agent paused on next


def answer_words(output: Any) -> str | None:
    """A yes/no answer in words ("Declined: “not this month”"); None if it is not one."""
    if not isinstance(output, Mapping):
        return None
    flags = [v for v in output.values() if isinstance(v, bool)]
    if len(flags) != 1:
        return None
    said = [v for v in output.values() if isinstance(v, str) and v.strip()]
    words = "Approved" if flags[0] else "Declined"
    return f"{words}: “{'; '.join(said)}”" if said else words


def short_json(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def outcome(call: ToolCall, messages: Sequence[Message], pending: Sequence[ToolCall]
            ) -> Outcome | None:
    """The outcome of a decided call (None while it waits)."""
    if call.decision is None or call.awaiting_approval:
        return None
    later = tuple(c for c in pending if c.ref != call.ref)
    return Outcome(happened=_happened(call), then=_then(call, later),
                   reply=_reply(call.ref, messages), waiting_on=later)


def _at(t: datetime | None) -> str:
    return f" at {t:%Y-%m-%d %H:%M:%S} UTC" if t else ""


def _happened(call: ToolCall) -> str:
    by, at, out = call.decided_by or "someone", _at(call.decided_at), call.output
    said = out if isinstance(out, Mapping) else {}
    if call.decision == "respond":
        words = answer_words(out)
        if words is not None:
            verdict, _, rest = words.partition(": ")
            return f"{verdict} by {by}{at}{': ' + rest if rest else ''}."
        return f"Answered by {by}{at}: {short_json(out)}."
    if call.decision == "restart":
        changed = call.original_input is not None and call.original_input != call.input
        how = f" with a changed input {short_json(call.input)}" if changed else ""
        return f"Run again by {by}{at}{how}."
    if call.decision == "approve":
        names = _approvers(call)
        return f"Approved{at}: the quorum was met ({names})."
    if call.decision == "expire":
        return f"Expired{at} with no decision: it failed closed."
    verb = "Withdrawn" if call.decision == "withdraw" else "Rejected"
    return f"{verb} by {by}{at}: “{said.get('reason') or ''}”."


def _approvers(call: ToolCall) -> str:
    if call.approval is None:
        return call.decided_by or ""
    current = call.approval.current_votes()
    return ", ".join(v.actor for v in current if v.kind == "approve")


def _then(call: ToolCall, later: Sequence[ToolCall]) -> str:
    status = call.status
    if status in ("rejected", "expired", "withdrawn"):
        first = "The tool did not run; the agent was told no, and why."
    elif status == "responded" or call.decision == "respond":
        first = "The tool did not run; the agent continued with this answer."
    elif status == "completed":
        first = f"The tool ran and returned {short_json(call.output)}."
    elif status == "failed":
        first = f"The tool ran and failed: {call.error}."
    elif status == "interrupted":
        first = "The tool ran and paused again: it needs another decision."
    else:
        first = "The tool is running."
    if later:
        first += f" The agent now waits on {', '.join(c.name for c in later)}."
    return first


def _reply(ref: str, messages: Sequence[Message]) -> str | None:
    """The agent's first words after this call's answer reached it."""
    seen = False
    for m in messages:
        if not seen:
            seen = any(p.tool_response is not None and p.tool_response.ref == ref
                       for p in m.content)
            continue
        if m.role == "model":
            text = " ".join(p.text for p in m.content if p.text)
            if text:
                return text
            asked = [p.tool_request.name for p in m.content if p.tool_request is not None]
            return f"(asked for {', '.join(asked)})" if asked else None
    return None
