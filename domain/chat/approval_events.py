"""Events of approvals and of interrupts ending without a decision: votes, expiry, withdrawal.

Each stores its consequence (a vote's `outcome`), decided by the command under the rules
of `domain.chat.rules`; `apply` only assigns, so a replay never re-judges a vote.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from interlock.domain.chat.events import ChatEvent
from interlock.domain.chat.policies import ApprovalState, ApprovalTerms, Outcome, Vote, VoteKind
from interlock.domain.chat.state import ChatState, ToolCall


class ApprovalRequested(ChatEvent):
    """A call held before it runs: its policy said it needs approval."""

    ref: str
    terms: ApprovalTerms
    input_sha256: str

    def apply(self, state: ChatState) -> None:
        call = state.calls[self.ref]
        call.status, call.interrupted_at = "interrupted", self.timestamp
        call.interrupt = {"approval": self.terms.model_dump(mode="json")}
        call.approval = ApprovalState.opened(self.terms, call.forked)


def _unset(value: Any) -> bool:
    return value is None  # added fields: absent from the JSON unless set (old bytes kept)


class ApprovalVoted(ChatEvent):
    """One principal's vote; `outcome` is what the approval became with it.

    Of a staged policy: `stage` is the stage it was cast in, `next_stage` the stage it
    opened by completing its own (the outcome stays pending), `stages_apply` which stages
    apply to an edit's new input (the edit sends the call back to the first of them)."""

    ref: str
    name: str
    vote: VoteKind
    actor: str
    input_sha256: str  # the input the voter saw
    edited_input: Any = None
    edited_input_sha256: str | None = None
    reason: str | None = None
    outcome: Outcome = "pending"
    resume_metadata: dict[str, Any] | None = None
    request_key: str | None = None
    request_sha256: str | None = None
    stage: int | None = Field(default=None, exclude_if=_unset)
    next_stage: int | None = Field(default=None, exclude_if=_unset)
    stages_apply: list[bool] | None = Field(default=None, exclude_if=_unset)
    # cast by delegation: for whom, by which delegation (domain/delegations.py)
    for_actor: str | None = Field(default=None, exclude_if=_unset)
    delegation_id: str | None = Field(default=None, exclude_if=_unset)

    def cast(self) -> Vote:
        """The vote as the approval's state keeps it."""
        return Vote(actor=self.actor, kind=self.vote, at=self.timestamp, reason=self.reason,
                    input_sha256=self.edited_input_sha256 or self.input_sha256, stage=self.stage,
                    for_actor=self.for_actor, delegation=self.delegation_id)

    def apply(self, state: ChatState) -> None:
        state.remember_key(self.request_key, self.request_sha256, self.originator_version)
        call = state.calls[self.ref]
        assert call.approval is not None
        call.approval.record(self.cast(), next_stage=self.next_stage,
                             stages_apply=self.stages_apply)
        if self.edited_input_sha256 is not None:
            if call.original_input is None:
                call.original_input = call.input
            call.input, call.input_by = self.edited_input, self.actor
        call.approval.outcome = self.outcome
        if self.outcome == "approved":
            call.status = "approved"
            _decided(state, call, "approve", self.actor, self.timestamp)
        elif self.outcome == "rejected":
            call.status = "rejected"
            call.output = {"rejected": True, "by": self.actor, "reason": self.reason}
            _decided(state, call, "reject", self.actor, self.timestamp)


class ApprovalEscalated(ChatEvent):
    """`escalate_after` passed: the escalation's roles and groups may decide too."""

    ref: str

    def apply(self, state: ChatState) -> None:
        approval = state.calls[self.ref].approval
        assert approval is not None
        approval.escalated = True


class InterruptExpired(ChatEvent):
    """The deadline passed with no outcome: it fails closed, the tool does not run."""

    ref: str
    expires_at: datetime
    input_sha256: str

    def apply(self, state: ChatState) -> None:
        call = state.calls[self.ref]
        call.status = "expired"
        call.output = {"expired": True, "at": self.expires_at.isoformat()}
        if call.approval is not None:
            call.approval.outcome = "rejected"
        _decided(state, call, "expire", None, self.timestamp)


class InterruptWithdrawn(ChatEvent):
    """The requester (or an admin) took the request back; the model is told why."""

    ref: str
    actor: str
    reason: str
    input_sha256: str

    def apply(self, state: ChatState) -> None:
        call = state.calls[self.ref]
        call.status = "withdrawn"
        call.output = {"withdrawn": True, "by": self.actor, "reason": self.reason}
        if call.approval is not None:
            call.approval.outcome = "rejected"
        _decided(state, call, "withdraw", self.actor, self.timestamp)


class AgentFingerprinted(ChatEvent):
    """The agent's definition changed since the chat last recorded it (or a first turn)."""

    fingerprint: str

    def apply(self, state: ChatState) -> None:
        state.fingerprint = self.fingerprint


def _decided(state: ChatState, call: ToolCall, kind: Any, actor: str | None, at: datetime) -> None:
    call.decision, call.decided_by, call.decided_at = kind, actor, at
    state.status = "running"
    state.close_batch_if_resolved()
