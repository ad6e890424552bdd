"""Request and response bodies of HTTP API v1 (wire shapes of DESIGN.md section 5)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    model_validator,
)

from interlock.domain import (
    Agent,
    ApproveEntry,
    Chat,
    EditEntry,
    Interrupt,
    Message,
    RejectEntry,
    RespondEntry,
    RestartEntry,
    Tool,
    TurnResult,
)
from interlock.domain.chat.events import ChatEvent
from interlock.domain.chat.history import history
from interlock.domain.chat.ids import id_text
from interlock.domain.receipts import CallViewed
from interlock.domain.review.aggregate import Review
from interlock.domain.review.events import (
    Assessment,
    QueryRecord,
    ReviewItem,
    ReviewStatus,
    SampleRecord,
    Severity,
    Verdict,
)
from interlock.projections.engine.stuck import StuckView
from interlock.projections.views.reviews import ReviewFact, ReviewSummary

MAX_TEXT = 100_000
MAX_ENTRIES = 100
MAX_LIMIT = 500
MAX_EVENTS = 1000  # a page of a chat's event log
MAX_TURNS = 100
MaxTurns = Annotated[int | None, Field(default=None, ge=1, le=MAX_TURNS,
                                       description="this call's tool-round budget")]



def _utc(value: datetime) -> datetime:
    """Query instants in UTC (naive ones are taken as UTC); out-of-range ones are refused."""
    try:
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    except OverflowError:
        raise ValueError("datetime out of range") from None


Instant = Annotated[datetime, AfterValidator(_utc)]

# Messages go out in Genkit's JSON: camelCase parts, absent fields left out.
WireMessage = Annotated[Message, PlainSerializer(lambda m: m.wire(), when_used="json")]

_CHAT_ID = "0b9c6f7e-3f55-4a4e-9a55-6f3c1f7c2d10"
_APPROVAL_INPUT: dict[str, Any] = {"action": "transfer", "details": "Transfer $500 to savings"}
_TRANSFER_INTERRUPT: dict[str, Any] = {
    "chat_id": _CHAT_ID, "ref": "userApproval-1", "name": "userApproval", "input": _APPROVAL_INPUT,
    "metadata": {"reason": "transfer"}, "requested_at": "2025-01-01T12:00:00Z",
}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChatCreate(_Body):
    agent: str = Field(min_length=1, max_length=200)
    metadata: dict[str, Any] | None = None
    text: str | None = Field(
        default=None, min_length=1, max_length=MAX_TEXT,
        description="the chat's first message: the chat is answered as the turn it starts"
                    " left it (a failed turn is a 502, as a message's)")
    max_turns: MaxTurns = None

    model_config = ConfigDict(json_schema_extra={
        "examples": [{"agent": "bankingAgent", "metadata": {"customer": "c-42"}},
                     {"agent": "bankingAgent", "text": "Transfer $500 to savings."}]})

    @model_validator(mode="after")
    def _budget_needs_text(self) -> ChatCreate:
        if self.max_turns is not None and self.text is None:
            raise ValueError("max_turns is the first message's tool-round budget: it needs text")
        return self


class MessageCreate(_Body):
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    max_turns: MaxTurns = None

    model_config = ConfigDict(json_schema_extra={
        "examples": [{"text": "Transfer $500 to savings."}]})


class ResumeRequest(_Body):
    respond: list[RespondEntry] = Field(default=[], max_length=MAX_ENTRIES)
    restart: list[RestartEntry] = Field(default=[], max_length=MAX_ENTRIES)
    approve: list[ApproveEntry] = Field(default=[], max_length=MAX_ENTRIES,
                                        description="yes votes on calls held for approval")
    edit: list[EditEntry] = Field(default=[], max_length=MAX_ENTRIES,
                                  description="changed inputs of held calls; others approve them")
    reject: list[RejectEntry] = Field(default=[], max_length=MAX_ENTRIES,
                                      description="no votes, with the reason the model is given")
    metadata: dict[str, Any] | None = Field(
        default=None, description="the resume's own metadata: on each decision, seen by restarts")
    max_turns: MaxTurns = None
    delegation: UUID | None = Field(
        default=None, description="vote for its delegator, by this delegation of yours "
        "(POST /v1/delegations): recorded as theirs, by you")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"respond": [{"ref": "userApproval-1", "name": "userApproval",
                      "output": {"approved": True, "feedback": "Looks good!"}}]},
        {"restart": [{"ref": "transferMoney-2", "name": "transferMoney",
                      "resumed_metadata": {"override": True}}],
         "metadata": {"ticket": "OPS-7"}, "max_turns": 3},
        {"approve": [{"ref": "transferMoney-2", "name": "transferMoney"}]},
        {"reject": [{"ref": "transferMoney-2", "name": "transferMoney",
                     "reason": "not to that account"}]},
        {"restart": [{"ref": "transferMoney-2", "name": "transferMoney",
                      "replace_input": {"amount": 900, "to_account": "savings"}}]},
    ]})


class WithdrawRequest(_Body):
    """Take pending requests back; the model is told the reason."""

    refs: list[str] = Field(min_length=1, max_length=MAX_ENTRIES)
    reason: str = Field(min_length=1, max_length=2000)


class ForkRequest(_Body):
    """Fork the chat as it was at event `version`; it goes on under `agent` if given."""

    version: int = Field(ge=1, le=2**31 - 1)
    agent: str | None = Field(default=None, min_length=1, max_length=200)

    model_config = ConfigDict(json_schema_extra={"examples": [{"version": 7}]})


class TurnPublic(BaseModel):
    """What one turn did: `messages` are the ones it appended; `interrupts` are pending now."""

    chat_id: str
    version: int
    finish_reason: Literal["stop", "interrupted", "max_turns", "failed"]
    text: str
    message: WireMessage | None
    messages: list[WireMessage]
    interrupts: list[Interrupt]
    error: str | None = None

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "chat_id": _CHAT_ID, "version": 5, "finish_reason": "interrupted",
        "text": "", "message": {"role": "model", "content": [{"toolRequest": {
            "ref": "userApproval-1", "name": "userApproval", "input": _APPROVAL_INPUT}}]},
        "messages": [], "interrupts": [_TRANSFER_INTERRUPT], "error": None}]})

    @classmethod
    def of(cls, result: TurnResult) -> TurnPublic:
        r = result
        return cls(
            chat_id=r.chat_id, version=r.version, finish_reason=r.finish_reason,
            text=r.text, message=r.message, messages=r.messages, interrupts=r.interrupts,
            error=r.error,
        )


class ChatPublic(BaseModel):
    """A chat's state now, or as of a version; `interrupts` are the pending ones."""

    id: str
    agent: str
    tenant: str
    status: Literal["idle", "running", "interrupted", "failed"]
    version: int
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    finish_reason: str | None
    error: str | None
    messages: list[WireMessage]
    interrupts: list[Interrupt]

    @classmethod
    def of(cls, chat: Chat) -> ChatPublic:
        s = chat.state
        return cls(
            id=id_text(chat.id), agent=s.agent, tenant=s.tenant, status=s.status,
            version=chat.version, metadata=s.metadata, created_at=s.created_at,
            updated_at=s.updated_at, finish_reason=s.finish_reason, error=s.error,
            messages=history(s),
            interrupts=[Interrupt.of(chat, c) for c in chat.pending_interrupts()],
        )


_EVENT_ENVELOPE = {"originator_id", "originator_version", "timestamp", "actor"}


class EventPublic(BaseModel):
    version: int
    type: str
    timestamp: datetime
    actor: str | None
    data: dict[str, Any]

    @classmethod
    def of(cls, event: ChatEvent) -> EventPublic:
        return cls(
            version=event.originator_version, type=type(event).__name__,
            timestamp=event.timestamp, actor=getattr(event, "actor", None),
            data=event.model_dump(mode="json", exclude=_EVENT_ENVELOPE),
        )


class ChatEvents(BaseModel):
    chat_id: str
    events: list[EventPublic]
    next_cursor: str | None = None  # pass as `after` for the next page; None on the last


class ToolPublic(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    interrupts: bool
    side_effects: bool
    distinct_approver: bool
    approval: dict[str, Any] | None = Field(
        default=None, description="the approval policy its calls are held under, if any")

    @classmethod
    def of(cls, tool: Tool, agent: Agent | None = None) -> ToolPublic:
        d = tool.definition
        policy = agent.policy(tool.name) if agent is not None else tool.approval
        return cls(
            name=tool.name, description=tool.description, input_schema=d.input_schema,
            output_schema=d.output_schema, interrupts=tool.interrupts,
            side_effects=tool.side_effects, distinct_approver=tool.distinct_approver,
            approval=policy.describe() if policy else None,
        )


class AgentPublic(BaseModel):
    name: str
    description: str
    model: str
    tools: list[ToolPublic]
    fingerprint: str = Field(description="hash of prompt, model id, tools, schemas, policies")

    @classmethod
    def of(cls, agent: Agent) -> AgentPublic:
        model = agent.model if isinstance(agent.model, str) else agent.model.name
        return cls(name=agent.name, description=agent.description, model=model,
                   tools=[ToolPublic.of(t, agent) for t in agent.tools],
                   fingerprint=agent.fingerprint)


class AgentList(BaseModel):
    items: list[AgentPublic]


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: dict[str, Any]


class ErrorBody(BaseModel):
    error: ErrorDetail

    model_config = ConfigDict(json_schema_extra={"examples": [{"error": {
        "code": "interrupt_not_pending",
        "message": "interrupt 'userApproval-1' was already decided (respond) by alice",
        "details": {"ref": "userApproval-1", "decided_by": "alice",
                    "decided_at": "2025-01-01T12:01:00Z", "decision": "respond"}}}]})


class ReplicaHealth(BaseModel):
    """A read replica as `/readyz` last probed it (docs/ha.md, "Read replicas")."""

    name: str  # its URL, password hidden
    up: bool  # it answered its last query
    reason: str | None = None  # why not
    reads: int  # queries it answered
    failures: int  # queries it failed or refused, each then read on the primary


class Health(BaseModel):
    status: Literal["ok", "ready", "not_ready"]
    store: bool | None = None
    store_reason: str | None = None  # why the store is unavailable (unreachable, read-only)
    views: bool | None = None
    stuck: list[StuckView] | None = None  # views stopped on an event, and which
    notifications_failed: int | None = None  # notifications given up (docs/notifications.md)
    # Read replicas (INTERLOCK_READ_REPLICAS): reported, never a reason to be not ready;
    # absent without them, so a server without replicas answers as before.
    replicas: list[ReplicaHealth] | None = Field(None, exclude_if=lambda v: v is None)


# -- compliance review (docs/review.md) --------------------------------------------------------

ReviewStrata = Literal["agent", "tool", "actor", "kind"]
Filter = Annotated[str | None, Field(default=None, max_length=2000,
                                     description="with query `custom`: docs/review.md's filter")]


class ReviewQueryRun(BaseModel):
    """Run a shipped review query by name (its parameters by name), or `custom` with a filter."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(max_length=100)
    filter: Filter = None
    params: dict[str, Any] = Field(default_factory=dict, max_length=20)
    limit: int = Field(default=50, ge=1, le=MAX_LIMIT)
    cursor: str | None = Field(default=None, max_length=1000)


class ReviewQueryAnswer(BaseModel):
    query: str
    version: int
    filter: str
    params: dict[str, Any]
    items: list[ReviewFact]
    next_cursor: str | None


class ReviewOpen(BaseModel):
    """Open a review of a seeded sample of a query's answer (a seed is made if none given)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(max_length=100)
    filter: Filter = None
    params: dict[str, Any] = Field(default_factory=dict, max_length=20)
    size: int = Field(ge=0, le=10_000)
    strata: list[ReviewStrata] = Field(default_factory=list, max_length=4)
    seed: str | None = Field(default=None, min_length=1, max_length=200)


class AssessmentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verdict: Verdict
    severity: Severity | None = None
    note: str = Field(default="", max_length=4000)


class SignOffIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = Field(default="", max_length=4000)


class ReviewItemPublic(ReviewItem):
    assessment: Assessment | None = None


class ReviewPublic(BaseModel):
    """A review as its events leave it."""

    id: str
    version: int
    tenant: str
    status: ReviewStatus
    opened_by: str
    opened_at: datetime
    query: QueryRecord
    sample: SampleRecord
    items: list[ReviewItemPublic]
    signed_off_by: str | None
    signed_off_at: datetime | None
    sign_off_note: str | None
    closed_by: str | None
    closed_at: datetime | None
    signers: int = 1  # 2: a second, distinct auditor signs off before close (the tenant's option)
    countersigned_by: str | None = None
    countersigned_at: datetime | None = None
    countersign_note: str | None = None

    @classmethod
    def of(cls, review: Review) -> ReviewPublic:
        s = review.state
        items = [ReviewItemPublic(**i.model_dump(), assessment=s.assessments.get(i.n))
                 for i in s.items]
        return cls(id=str(review.id), version=review.version, items=items,
                   **s.model_dump(include={"tenant", "status", "opened_by", "opened_at",
                                           "query", "sample", "signed_off_by", "signed_off_at",
                                           "sign_off_note", "closed_by", "closed_at",
                                           "signers", "countersigned_by", "countersigned_at",
                                           "countersign_note"}))


class ReviewList(BaseModel):
    items: list[ReviewSummary]


class ReceiptPublic(BaseModel):
    """A view receipt: `principal` opened the call's console page at `at`, in the console
    session `session` names (a hash), and it showed the input whose SHA-256 is
    `input_sha256`."""

    version: int
    principal: str
    at: datetime
    session: str
    input_sha256: str

    @classmethod
    def of(cls, event: CallViewed) -> ReceiptPublic:
        return cls(version=event.originator_version, principal=event.principal,
                   at=event.timestamp, session=event.session, input_sha256=event.input_sha256)


class ReceiptList(BaseModel):
    """Who opened a call's page while it was pending, oldest first (docs/review.md)."""

    chat_id: str
    ref: str
    items: list[ReceiptPublic]
