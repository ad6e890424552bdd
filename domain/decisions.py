"""Resume entries, and the checks a decision passes before it becomes an event."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from interlock.domain import events as ev
from interlock.domain.approvals import normalise_id
from interlock.domain.canonical import sha256_hex
from interlock.domain.errors import (
    ApprovalRequiredError,
    DuplicateRefError,
    EmptyResumeError,
    ForbiddenError,
    InterruptNameMismatchError,
    InterruptNotPendingError,
    InvalidToolInputError,
    InvalidToolOutputError,
    StaleInterruptError,
    UnknownInterruptError,
)
from interlock.domain.jsonsafe import check_json
from interlock.domain.state import ToolCall
from interlock.domain.tools import SchemaError, Tool

SHA256_HEX = r"^[0-9a-f]{64}$"
Decision = tuple[type[ev.ChatEvent], dict[str, Any]]


class RespondEntry(BaseModel):
    """The client supplies the tool's output; the tool is not run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    output: Any = None
    metadata: dict[str, Any] | None = None
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)


class RestartEntry(BaseModel):
    """The server runs the tool again, with its original or a replaced input."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    resumed_metadata: dict[str, Any] | None = None
    replace_input: Any = None
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)


Entry = RespondEntry | RestartEntry


def check_entries(
    respond: Sequence[RespondEntry],
    restart: Sequence[RestartEntry],
    metadata: dict[str, Any] | None = None,
) -> None:
    """Every value of a resume must be recordable as given (see domain.jsonsafe)."""
    for kind, entries in (("respond", respond), ("restart", restart)):
        for i, entry in enumerate(entries):
            check_json(dict(entry), f"{kind}[{i}]")
    check_json(metadata, "metadata")


def check_batch(refs: list[str]) -> None:
    """A resume is one batch: at least one entry, no ref twice."""
    if not refs:
        raise EmptyResumeError()
    seen: set[str] = set()
    for ref in refs:
        if ref in seen:
            raise DuplicateRefError(ref)
        seen.add(ref)


def pending_call(
    calls: Mapping[str, ToolCall], entry: Entry, actor: str, tools: Mapping[str, Tool]
) -> ToolCall:
    """The interrupted call an entry decides, checked against what the entry claims."""
    call = calls.get(entry.ref)
    if call is None:
        raise UnknownInterruptError(entry.ref)
    if call.status != "interrupted":
        raise InterruptNotPendingError(entry.ref, call.decided_by, call.decided_at, call.decision)
    if call.name != entry.name:
        raise InterruptNameMismatchError(entry.ref, call.name, entry.name)
    if call.awaiting_approval:
        raise ApprovalRequiredError(entry.ref)  # a respond must not bypass the policy
    _check_seen(entry, call)
    _check_approver(tools.get(entry.name), call, actor)
    return call


def respond_decision(entry: RespondEntry, call: ToolCall, tool: Tool | None) -> Decision:
    output = entry.output
    if tool is not None:
        try:
            output = tool.validate_output(entry.output, strict=True)
        except SchemaError as exc:
            raise InvalidToolOutputError(entry.ref, entry.name, exc.errors) from None
    return ev.Responded, {
        "ref": entry.ref,
        "name": entry.name,
        "output": output,
        "metadata": entry.metadata,
        "input_sha256": sha256_hex(call.input),
    }


def restart_decision(entry: RestartEntry, call: ToolCall, tool: Tool | None) -> Decision:
    data: dict[str, Any] = {
        "ref": entry.ref,
        "name": entry.name,
        "resumed_metadata": entry.resumed_metadata,
        "original_input": call.input,
        "input_sha256": sha256_hex(call.input),
    }
    if "replace_input" in entry.model_fields_set:
        data["replace_input"] = _replaced_input(entry, tool)
        data["replaced_input_sha256"] = sha256_hex(data["replace_input"])
    return ev.Restarted, data


def _replaced_input(entry: RestartEntry, tool: Tool | None) -> Any:
    if tool is None:
        return entry.replace_input
    try:
        return tool.input_json(entry.replace_input, strict=True)
    except SchemaError as exc:
        raise InvalidToolInputError(entry.ref, entry.name, exc.errors) from None


def _check_seen(entry: Entry, call: ToolCall) -> None:
    """A decision made on another input than the pending one is stale."""
    if entry.input_sha256 is not None and entry.input_sha256 != sha256_hex(call.input):
        raise StaleInterruptError(entry.ref, entry.input_sha256, sha256_hex(call.input))


def _check_approver(tool: Tool | None, call: ToolCall, actor: str) -> None:
    """Four eyes: not who sent the turn, nor whoever last replaced the input (ids normalised)."""
    if tool is None or not tool.distinct_approver:
        return
    if normalise_id(actor) == normalise_id(call.requester):
        asked = "last replaced its input" if call.input_by else "sent the turn"
        raise ForbiddenError(
            f"{call.name} needs an approver other than {actor}, who {asked}",
            ref=call.ref,
            actor=actor,
            reason="requester",
        )
