"""Interlock's chats as Agent Protocol (LangGraph) threads: values, states, interrupts, and
a `Command(resume=...)` as the decisions Interlock records."""

from __future__ import annotations

import json
from typing import Any, Literal
from uuid import UUID, uuid5

from pydantic import ValidationError

from interlock.domain import ApproveEntry, Chat, EditEntry, RejectEntry, RespondEntry
from interlock.domain.chat.canonical import wire_time
from interlock.domain.chat.messages import Message
from interlock.domain.chat.state import ToolCall
from interlock.domain.errors import InvalidRequestError
from interlock.domain.results import Interrupt
from interlock.domain.threads import Reservation

ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
STATUS: dict[str, ThreadStatus] = {
    "idle": "idle", "running": "busy", "interrupted": "interrupted", "failed": "error"}
Entry = RespondEntry | ApproveEntry | EditEntry | RejectEntry
REJECTS = ("reject", "ignore")


def messages(chat: Chat) -> list[dict[str, Any]]:
    """The chat's messages as LangChain message dicts (human, ai with tool_calls, tool)."""
    out: list[dict[str, Any]] = []
    for index, message in enumerate(chat.state.messages):
        out += _lc(message, f"{chat.id}-{index}")
    return out


def _lc(message: Message, mid: str) -> list[dict[str, Any]]:
    if message.role == "user":
        return [{"type": "human", "content": message.text, "id": mid}]
    if message.role == "model":
        calls = [{"id": r.ref, "name": r.name, "args": _args(r.input), "type": "tool_call"}
                 for r in message.tool_requests]
        return [{"type": "ai", "content": message.text, "tool_calls": calls, "id": mid}]
    if message.role == "tool":
        return [{"type": "tool", "id": f"{mid}-{i}", "tool_call_id": p.tool_response.ref,
                 "name": p.tool_response.name, "content": _text(p.tool_response.output)}
                for i, p in enumerate(message.content) if p.tool_response is not None]
    return []  # the system prompt is the assistant's, not the thread's


def _args(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"input": value}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def values(chat: Chat) -> dict[str, Any]:
    return {"messages": messages(chat)}


def interrupt(chat: Chat, call: ToolCall) -> dict[str, Any]:
    """A pending call as an Agent Protocol interrupt; its value follows Agent Inbox's
    HumanInterrupt (action_request, config, description) and carries Interlock's own view."""
    shown = Interrupt.of(chat, call)
    held = call.approval is not None
    return {"id": call.ref, "value": {
        "action_request": {"action": call.name, "args": _args(call.input)},
        "config": {"allow_accept": held, "allow_edit": held, "allow_ignore": held,
                   "allow_respond": not held},
        "description": _description(call),
        "interlock": shown.model_dump(mode="json"),
    }}


def _description(call: ToolCall) -> str:
    if call.approval is not None:
        return f"{call.name} is held for approval: resume with {{'type': 'accept'}}, " \
               "{'type': 'edit', 'args': {...}} or {'type': 'reject', 'args': 'reason'}"
    return f"{call.name} asks for an answer: resume with the tool's output"


def interrupts(chat: Chat) -> list[dict[str, Any]]:
    return [interrupt(chat, c) for c in chat.pending_interrupts()]


def thread(chat: Chat) -> dict[str, Any]:
    s = chat.state
    pending = interrupts(chat)
    return {"thread_id": str(chat.id), "created_at": wire_time(s.created_at),
            "updated_at": wire_time(s.updated_at), "metadata": _metadata(chat),
            "status": STATUS[s.status], "values": values(chat),
            "interrupts": {i["id"]: [i] for i in pending}}


def _metadata(chat: Chat) -> dict[str, Any]:
    return {**chat.state.metadata, "graph_id": chat.state.agent,
            "assistant_id": chat.state.agent}


def reserved_thread(reserved: Reservation) -> dict[str, Any]:
    """A thread no run has begun yet: no agent, no values, idle."""
    when = wire_time(reserved.reserved_at)
    return {"thread_id": str(reserved.thread_id), "created_at": when, "updated_at": when,
            "metadata": {}, "status": "idle", "values": {"messages": []}, "interrupts": {}}


def reserved_state(reserved: Reservation) -> dict[str, Any]:
    """The state of a thread no run has begun: empty, at no checkpoint yet."""
    return {"values": {"messages": []}, "next": [], "tasks": [], "interrupts": [],
            "checkpoint": {"thread_id": str(reserved.thread_id), "checkpoint_ns": "",
                           "checkpoint_id": None},
            "metadata": {}, "created_at": wire_time(reserved.reserved_at),
            "parent_checkpoint": None}


def checkpoint(chat: Chat) -> dict[str, Any]:
    return {"thread_id": str(chat.id), "checkpoint_ns": "", "checkpoint_id": str(chat.version)}


def state(chat: Chat, parent: int | None = None) -> dict[str, Any]:
    """The thread's state at the chat's version (a checkpoint is a version)."""
    pending = interrupts(chat)
    tasks = [{"id": i["id"], "name": i["value"]["action_request"]["action"], "error": None,
              "interrupts": [i], "checkpoint": None, "state": None, "result": None}
             for i in pending]
    return {"values": values(chat), "next": ["tools"] if pending else [],
            "checkpoint": checkpoint(chat), "metadata": _metadata(chat),
            "created_at": wire_time(chat.state.updated_at),
            "parent_checkpoint": None if parent is None else {
                "thread_id": str(chat.id), "checkpoint_ns": "", "checkpoint_id": str(parent)},
            "tasks": tasks, "interrupts": pending}


def run_id(chat_id: UUID, version: int) -> str:
    """A run is the turn that ended at a version: its id is derived, nothing is stored."""
    return str(uuid5(chat_id, f"run-{version}"))


def user_text(given: Any) -> str:
    """The text of the last human message of a run's `input`."""
    found = given.get("messages") if isinstance(given, dict) else None
    if isinstance(found, str):
        return found
    if isinstance(found, list) and found:
        last = found[-1]
        if isinstance(last, str):
            return last
        if isinstance(last, dict) and last.get("type", last.get("role")) in (
                "human", "user") and isinstance(last.get("content"), str):
            return str(last["content"])
    raise InvalidRequestError(
        "input must be {'messages': [{'role': 'user', 'content': 'text'}]}: Interlock runs a "
        "turn from one user message", field="input")


def resume_entries(chat: Chat, resume: Any) -> list[Entry]:
    """`Command(resume=...)` as decisions: a value for the one pending interrupt, or a map
    of interrupt ids to values. A held call takes Agent Inbox's answers (accept, edit,
    reject/ignore); a tool's own interrupt takes the tool's output. A resume that names no
    pending call goes to the domain all the same, which says who decided it first."""
    pending = [c.ref for c in chat.pending_interrupts()]
    if isinstance(resume, dict) and resume and all(k in chat.state.calls for k in resume):
        chosen = resume
    elif len(pending) == 1:
        chosen = {pending[0]: resume}
    elif not pending and (last := _last_asked(chat)) is not None:
        chosen = {last: resume}  # a repeat of the last resume: the domain says who decided
    else:
        raise InvalidRequestError(
            f"{len(pending)} interrupts are pending: resume with {{interrupt_id: value}}",
            pending=pending)
    try:
        return [_entry(chat.state.calls[ref], value) for ref, value in chosen.items()]
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise InvalidRequestError(f"resume: {where}: {error['msg']}", field="command") from None


def _last_asked(chat: Chat) -> str | None:
    asked = [c for c in chat.state.calls.values() if c.interrupted_at is not None]
    return max(asked, key=lambda c: c.interrupted_at or c.requested_at).ref if asked else None


def _entry(call: ToolCall, value: Any) -> Entry:
    if call.approval is None:
        return RespondEntry(ref=call.ref, name=call.name, output=value)
    if call.status != "interrupted":  # decided already: the domain says by whom
        return ApproveEntry(ref=call.ref, name=call.name)
    answer = value if isinstance(value, dict) else {}
    kind, args, sha = answer.get("type"), answer.get("args"), answer.get("input_sha256")
    if kind == "accept":
        return ApproveEntry(ref=call.ref, name=call.name, input_sha256=sha)
    if kind == "edit":
        edited = args.get("args", args) if isinstance(args, dict) else args
        return EditEntry(ref=call.ref, name=call.name, input=edited, input_sha256=sha,
                         reason=answer.get("reason"))
    if kind in REJECTS:
        reason = args if isinstance(args, str) and args else f"{kind} by an Agent Protocol client"
        return RejectEntry(ref=call.ref, name=call.name, reason=reason, input_sha256=sha)
    raise InvalidRequestError(
        f"{call.name} ({call.ref}) is held by an approval policy: resume it with "
        "{'type': 'accept' | 'edit' | 'reject', 'args': ...}", ref=call.ref)
