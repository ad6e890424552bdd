"""The Chat aggregate's state: what events build, what snapshots store."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from interlock.domain.approvals import ApprovalState
from interlock.domain.history_list import Messages
from interlock.domain.messages import Message, Part, ToolResponse

ChatStatus = Literal["idle", "running", "interrupted", "failed"]
FinishReason = Literal["stop", "interrupted", "max_turns", "failed"]
CallStatus = Literal[
    "requested", "completed", "failed", "interrupted", "responded", "restarted",
    "approved", "rejected", "expired", "withdrawn",
]
DecisionKind = Literal["respond", "restart", "approve", "edit", "reject", "expire", "withdraw"]
# Resolved: the model gets its response. Rejected, expired and withdrawn calls never ran;
# their response says why (`output` holds the structured outcome).
RESOLVED: frozenset[str] = frozenset(
    {"completed", "failed", "responded", "rejected", "expired", "withdrawn"}
)
RUNNABLE: frozenset[str] = frozenset({"requested", "restarted", "approved"})


class ToolCall(BaseModel):
    """One tool request of a model reply, through its whole life."""

    ref: str
    name: str
    input: Any = None
    turn: int
    requested_at: datetime
    requested_by: str | None = None
    input_by: str | None = None  # who last replaced the input: its requester from then on
    status: CallStatus = "requested"
    attempt: int = 1
    output: Any = None
    error: str | None = None
    interrupt: Any = None  # the interrupt's payload: any JSON value
    interrupted_at: datetime | None = None
    decision: DecisionKind | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    resumed: dict[str, Any] | None = None  # a restart's own metadata ({} for a bare one)
    resume_metadata: dict[str, Any] | None = None  # the metadata of the resume that answered it
    original_input: Any = None
    approval: ApprovalState | None = None

    @property
    def requester(self) -> str | None:
        """Who asked for this exact input: whoever last changed it, else who sent the turn."""
        return self.input_by or self.requested_by

    @property
    def awaiting_approval(self) -> bool:
        return (self.status == "interrupted" and self.approval is not None
                and self.approval.outcome == "pending")

    def response_output(self) -> Any:
        """What the model is told: the output, or `{"error": ...}` for a failed call."""
        if self.status == "failed":
            return {"error": self.error}
        return self.output

    def response_part(self) -> Part:
        """The tool response part; a failure is flagged in its metadata, never by its shape."""
        return Part(
            tool_response=ToolResponse(ref=self.ref, name=self.name, output=self.response_output()),
            metadata={"failed": True} if self.status == "failed" else None,
        )


class KeyUse(BaseModel):
    """A resume's Idempotency-Key: the body it came with and where its turn began."""

    request_sha256: str
    version: int
    since: int


class ChatState(BaseModel):
    agent: str
    tenant: str
    started_by: str
    metadata: dict[str, Any] = {}
    created_at: datetime
    updated_at: datetime
    status: ChatStatus = "idle"
    messages: Messages = Field(default_factory=Messages)
    calls: dict[str, ToolCall] = {}
    batch: list[str] = []
    batch_closed: bool = True
    turn: int = 0
    turn_by: str | None = None
    finish_reason: FinishReason | None = None
    error: str | None = None
    chain_tip: str | None = None
    fingerprint: str | None = None  # of the agent, as last recorded
    resume_keys: dict[str, KeyUse] = {}

    def remember_key(self, key: str | None, request_sha256: str | None, version: int) -> None:
        if key is not None and request_sha256 is not None and key not in self.resume_keys:
            self.resume_keys[key] = KeyUse(
                request_sha256=request_sha256, version=version, since=len(self.messages)
            )

    def close_batch_if_resolved(self) -> None:
        """Once every call of the reply is resolved, add the tool message (request order)."""
        calls = [self.calls[ref] for ref in self.batch]
        if self.batch_closed or not all(c.status in RESOLVED for c in calls):
            return
        self.batch_closed = True
        self.messages.append(Message(role="tool", content=[c.response_part() for c in calls]))
