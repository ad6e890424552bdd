"""The checks a vote, an expiry or a withdrawal passes before it becomes an event."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from interlock.domain.approval_events import ApprovalVoted
from interlock.domain.approvals import ApprovalState, Decider, Outcome, VoteKind, normalise_id
from interlock.domain.canonical import sha256_hex
from interlock.domain.decisions import SHA256_HEX, Decision
from interlock.domain.errors import (
    AlreadyVotedError,
    ForbiddenError,
    InterruptExpiredError,
    InterruptNameMismatchError,
    InterruptNotPendingError,
    InvalidToolInputError,
    NotAnApprovalError,
    StaleInterruptError,
    UnknownInterruptError,
)
from interlock.domain.state import ToolCall
from interlock.domain.tools import SchemaError, Tool

MAX_REASON = 2000
# The error of a turn a service without the chat's agent ended after an expiry or a
# withdrawal: the process that has the agent continues it (or any client's retry does).
AWAITS_AGENT = "a pending request ended; retry to continue"


class ApproveEntry(BaseModel):
    """A yes to a held call, on the input shown (echo its `input_sha256` to be sure)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)


class EditEntry(BaseModel):
    """A changed input for a held call: validated, both kept; others must approve it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    input: Any
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)


class RejectEntry(BaseModel):
    """A no, with a reason the model is given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str
    reason: str = Field(min_length=1, max_length=MAX_REASON)
    input_sha256: str | None = Field(default=None, pattern=SHA256_HEX)


VoteEntry = ApproveEntry | EditEntry | RejectEntry
KIND: Mapping[type[BaseModel], VoteKind] = {
    ApproveEntry: "approve", EditEntry: "edit", RejectEntry: "reject"}


def held_call(calls: Mapping[str, ToolCall], entry: VoteEntry, now: datetime) -> ToolCall:
    """The call awaiting approval that a vote names, still open at `now`."""
    call = calls.get(entry.ref)
    if call is None:
        raise UnknownInterruptError(entry.ref)
    if call.status == "expired" and call.decided_at is not None:
        raise InterruptExpiredError(entry.ref, _expiry(call) or call.decided_at)
    if call.status != "interrupted":
        raise InterruptNotPendingError(entry.ref, call.decided_by, call.decided_at, call.decision)
    if call.name != entry.name:
        raise InterruptNameMismatchError(entry.ref, call.name, entry.name)
    if not call.awaiting_approval:
        raise NotAnApprovalError(entry.ref)
    expires_at = _expiry(call)
    if expires_at is not None and now >= expires_at:
        raise InterruptExpiredError(entry.ref, expires_at)  # fails closed before the sweeper
    current = sha256_hex(call.input)
    if entry.input_sha256 is not None and entry.input_sha256 != current:
        raise StaleInterruptError(entry.ref, entry.input_sha256, current)
    return call


def _expiry(call: ToolCall) -> datetime | None:
    return None if call.approval is None else call.approval.terms.expires_at


def check_voter(call: ToolCall, decider: Decider) -> None:
    """Routing, four-eyes and one vote per person: each refusal says why, nothing is written."""
    assert call.approval is not None
    roles, groups = call.approval.deciders()
    if not decider.may_decide(roles, groups):
        raise ForbiddenError(
            f"{decider.id} may not decide {call.name} {call.ref}: it needs one of the roles"
            f" {sorted(roles)} or groups {sorted(groups)}",
            ref=call.ref, actor=decider.id, reason="not_a_decider",
            roles=sorted(roles), groups=sorted(groups))
    if normalise_id(decider.id) == normalise_id(call.requester):
        raise ForbiddenError(
            f"{decider.id} asked for this input of {call.ref}; someone else must decide it",
            ref=call.ref, actor=decider.id, reason="requester")
    earlier = call.approval.vote_of(decider.id, sha256_hex(call.input))
    if earlier is not None:
        raise AlreadyVotedError(call.ref, earlier.actor, earlier.kind, earlier.at)


def vote_decision(entry: VoteEntry, call: ToolCall, tool: Tool | None) -> Decision:
    """The ApprovalVoted event's data, with the outcome this vote brings."""
    assert call.approval is not None
    kind = KIND[type(entry)]
    data: dict[str, Any] = {"ref": entry.ref, "name": entry.name, "vote": kind,
                            "input_sha256": sha256_hex(call.input)}
    if isinstance(entry, EditEntry):
        data["edited_input"] = _edited(entry, tool)
        data["edited_input_sha256"] = sha256_hex(data["edited_input"])
    if isinstance(entry, RejectEntry):
        data["reason"] = entry.reason
    data["outcome"] = _outcome(kind, call)
    return ApprovalVoted, data


def _outcome(kind: VoteKind, call: ToolCall) -> Outcome:
    """An edit never resolves: its author became the requester of the new input."""
    assert call.approval is not None
    if kind == "reject":
        return "rejected" if call.approval.terms.reject_rejects else "pending"
    if kind == "edit":
        return "pending"
    count = len(call.approval.approvers(sha256_hex(call.input), call.requester)) + 1
    return "approved" if count >= call.approval.terms.quorum else "pending"


def _edited(entry: EditEntry, tool: Tool | None) -> Any:
    if tool is None:
        return entry.input
    try:
        return tool.input_json(entry.input, strict=True)
    except SchemaError as exc:
        raise InvalidToolInputError(entry.ref, entry.name, exc.errors) from None


def barred_voters(state: ApprovalState, requester: str | None) -> set[str]:
    """Who may not vote on a held call's current input (normalised): who asked for it, and
    who voted on it already. The inbox's `decidable` filter lists by this, `check_voter`
    refuses by the same rule (votes on an input an edit replaced no longer bar anyone)."""
    current = next((v.input_sha256 for v in reversed(state.votes) if v.kind == "edit"), None)
    voted = {v.actor for v in state.votes if current is None or v.input_sha256 == current}
    return {normalise_id(i) for i in (*voted, requester)}


def check_withdrawer(call: ToolCall, decider: Decider) -> None:
    """Only who asked (who sent the turn or last changed the input) or an admin withdraws."""
    asked = {normalise_id(call.requested_by), normalise_id(call.input_by)}
    if not decider.admin and normalise_id(decider.id) not in asked:
        raise ForbiddenError(
            f"{decider.id} did not ask for {call.ref}; only its requester or an admin withdraws",
            ref=call.ref, actor=decider.id, reason="not_the_requester")
