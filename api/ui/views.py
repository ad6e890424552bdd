"""View models the templates render: built from the service and read models, no HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from interlock.api.auth import Principal
from interlock.api.schemas import EventPublic
from interlock.api.ui.delegating import DelegationChoice, choices
from interlock.api.ui.edits import EditView, changed_inputs, edit_history
from interlock.api.ui.forms import SchemaForm, schema_form
from interlock.api.ui.outcome import Outcome, outcome
from interlock.api.ui.policy import PolicyView, open_to_votes, policy_view, why_not_vote
from interlock.audit.integrity import ChainBreak, Verifier
from interlock.domain import Interlock
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.events import ChatEvent
from interlock.domain.chat.fork_events import ChatForked
from interlock.domain.chat.messages import Message
from interlock.domain.chat.state import ToolCall
from interlock.domain.delegations import DelegationDesk
from interlock.domain.errors import UnknownInterruptError
from interlock.projections.interface import DecisionFilter, DecisionRow, InboxRow, ReadModels


def pretty(value: Any) -> str:
    """JSON as people read it: indented, keys in their order, unicode as is."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class ForkInfo:
    """This chat began as a fork: of chat `chat_id` at `version` (None: not known here), by
    `by`."""

    chat_id: str
    version: int | None = None
    by: str | None = None


def fork_of(events: Iterable[ChatEvent]) -> ForkInfo | None:
    """The fork's source, from its `ChatForked` (the event after `ChatStarted`)."""
    for e in events:
        if isinstance(e, ChatForked):
            return ForkInfo(chat_id=str(e.source_id), version=e.source_version, by=e.actor)
    return None


def inbox_forks(service: Interlock, rows: Iterable[InboxRow], tenant: str) -> dict[str, ForkInfo]:
    """The page's held rows asked afresh in a fork, by chat: of which chat, at which version
    (two events read per such chat; a row not held is not marked)."""
    forks = {r.chat_id for r in rows if (r.approval or {}).get("forked_from")}
    found = {c: fork_of(service.chat_events(UUID(c), tenant=tenant, limit=2)) for c in forks}
    return {c: f for c, f in found.items() if f is not None}


def details(metadata: Any, held: bool) -> list[tuple[str, Any]]:
    """What the tool put in its interrupt, field by field; a held call's policy terms are
    left out (the Decide card shows them in words)."""
    if isinstance(metadata, dict):
        return [(str(k), v) for k, v in metadata.items() if not (held and k == "approval")]
    return [] if metadata is None else [("value", metadata)]


@dataclass
class InterruptPage:
    """Everything the approval page shows about one interrupt."""

    chat_id: str
    agent: str
    call: ToolCall
    description: str
    input_json: str
    input_sha256: str
    metadata_json: str
    conversation: list[Message]
    decisions: list[DecisionRow]
    respond_form: SchemaForm
    restart_form: SchemaForm
    why_not: str | None  # why this visitor cannot decide, shown instead of acting
    policy: PolicyView | None = None  # a call held by an approval policy: vote on it
    outcome: Outcome | None = None  # once decided: what happened and what came next
    edits: tuple[EditView, ...] = ()  # who changed the input, why, old -> new
    changed: dict[str, ToolCall] = field(default_factory=dict)  # calls with a replaced input
    done: bool = False  # this visitor just decided: the outcome takes the focus
    notice: str | None = None  # e.g. decided elsewhere meanwhile
    notice_ok: bool = False  # the notice reports success (a vote recorded), not a refusal
    errors: list[dict[str, Any]] = field(default_factory=list)
    action: str | None = None  # the form the errors belong to
    values: dict[str, str] = field(default_factory=dict)  # what was submitted, to refill
    fork: ForkInfo | None = None  # this chat is a fork, and the call was asked afresh here
    details: list[tuple[str, Any]] = field(default_factory=list)  # the interrupt's payload
    # delegations to this visitor in force that let them vote on it, for their delegators
    delegations: tuple[DelegationChoice, ...] = ()
    own_vote: bool = True  # the visitor may vote as themselves

    @property
    def settling(self) -> bool:
        """One more approval reaches the quorum of the last stage and decides: the page
        asks to confirm (a staged call's earlier stage only passes it on)."""
        return (self.policy is not None and self.policy.final
                and self.policy.approvals + 1 >= self.policy.quorum)

    @property
    def pending(self) -> bool:
        return self.call.status == "interrupted"

    @property
    def voting(self) -> bool:
        """Held for approval: approve, reject or edit (respond and restart do not apply)."""
        return self.call.awaiting_approval


def interrupt_page(
    service: Interlock, views: ReadModels, who: Principal, chat_id: UUID, ref: str
) -> InterruptPage:
    """The approval page of `ref` in `chat_id` as `who` may see it (their tenant only)."""
    chat = service.get_chat(chat_id, tenant=who.tenant)
    call, at = chat.state.calls.get(ref), datetime.now(UTC)
    if call is None or call.interrupted_at is None:
        raise UnknownInterruptError(ref)
    tool = service.agent(chat.state.agent).tool(call.name)
    definition = tool.definition if tool else None
    decisions = views.decisions(DecisionFilter(tenant=who.tenant, chat_id=str(chat_id)), 50)
    events = ([EventPublic.of(e) for e in service.chat_events(chat_id, tenant=who.tenant)]
              if call.input_by is not None else [])
    delegated = delegated_votes(service, who, call, at)
    own = why_not_vote(who, call, at, bool(delegated)) if call.awaiting_approval else None
    return InterruptPage(
        chat_id=str(chat_id), agent=chat.state.agent, call=call,
        description=definition.description if definition else "(this tool is no longer served)",
        input_json=pretty(call.input), input_sha256=sha256_hex(call.input),
        metadata_json=pretty(call.interrupt),
        conversation=[m for m in chat.state.messages if m.role != "system"],
        decisions=[d for d in decisions.items if d.ref == ref],
        respond_form=schema_form(definition.output_schema if definition else None,
                                 decide=True),
        restart_form=schema_form(definition.input_schema if definition else None),
        why_not=(own if call.awaiting_approval
                 else why_not(who, call, tool.distinct_approver if tool else False)),
        delegations=delegated, own_vote=own is None,
        policy=policy_view(call, at),
        outcome=outcome(call, chat.state.messages, chat.pending_interrupts()),
        edits=edit_history(call, events) if call.original_input is not None else (),
        changed={ref: call} if call.input_by is not None else {},
        fork=(fork_of(service.chat_events(chat_id, tenant=who.tenant, limit=2))
              if call.forked is not None else None),
        details=details(call.interrupt, call.approval is not None),
    )


def delegated_votes(service: Interlock, who: Principal, call: ToolCall, at: datetime
                    ) -> tuple[DelegationChoice, ...]:
    """The delegations to `who` under which they may vote on this held call now (the
    tenant's delegations are read only for a call open to votes)."""
    if not call.awaiting_approval or not open_to_votes(call, at):
        return ()
    return choices(DelegationDesk(service).load(who.tenant), who, call, at)


def why_not(who: Principal, call: ToolCall, distinct_approver: bool) -> str | None:
    """The reason `who` cannot decide this call, or None (the server enforces it too)."""
    if "approver" not in who.roles and "admin" not in who.roles:
        return f"You ({who.id}) do not have the approver role, so you can read but not decide."
    if distinct_approver and call.requested_by == who.id:
        return (f"Four-eyes: {call.name} needs an approver other than the person who sent "
                f"the turn, and that was you ({who.id}). Ask a colleague to decide.")
    return None


@dataclass(frozen=True)
class ChatPage:
    """A chat's timeline, its state as of a version, and whether its chain verifies."""

    chat_id: str
    agent: str
    status: str
    version: int
    latest: int
    events: list[EventPublic]
    messages: list[Message]
    pending: list[ToolCall]
    chain_ok: bool
    chain_problem: str | None
    changed: dict[str, ToolCall]  # calls with a replaced input: the conversation shows it
    broken_at: int | None = None  # the first version that does not verify: shown up to it
    fork: ForkInfo | None = None  # the chat began as a fork of another

    @property
    def live(self) -> bool:
        """The chat as it is now: its waiting calls may be decided from here."""
        return self.version == self.latest and self.chain_ok


def chat_page(service: Interlock, who: Principal, chat_id: UUID, version: int | None) -> ChatPage:
    """The chat page; `version` None is now. A broken chain is read only up to its break."""
    broken = verify_chain(service, chat_id)
    trusted = broken.version - 1 if broken is not None and broken.version > 1 else None
    events = [EventPublic.of(e) for e in
              service.chat_events(chat_id, tenant=who.tenant, limit=trusted)]
    if trusted is not None:
        version = min(version or trusted, trusted)
    chat = service.get_chat(chat_id, version=version, tenant=who.tenant)
    return ChatPage(
        chat_id=str(chat_id), agent=chat.state.agent, status=chat.state.status,
        version=chat.version, latest=len(events), events=events,
        messages=[m for m in chat.state.messages if m.role != "system"],
        pending=chat.pending_interrupts(), chain_ok=broken is None,
        chain_problem=None if broken is None else f"version {broken.version}: {broken.reason}",
        changed=changed_inputs(chat.state.calls, _requested_refs(chat.state.messages)),
        broken_at=broken.version if broken is not None else None,
        fork=_fork_in(events),
    )


def _fork_in(events: list[EventPublic]) -> ForkInfo | None:
    """The chat page's fork line, read from the `ChatForked` event it lists anyway."""
    for e in events[:2]:
        if e.type == ChatForked.__name__:
            return ForkInfo(chat_id=str(e.data.get("source_id")),
                            version=e.data.get("source_version"), by=e.actor)
    return None


def _requested_refs(messages: Iterable[Message]) -> list[str]:
    return [p.tool_request.ref for m in messages for p in m.content
            if p.tool_request is not None and p.tool_request.ref is not None]


def verify_chain(service: Interlock, chat_id: UUID) -> ChainBreak | None:
    """The console's one call into domain.integrity: the chat's first break, or None."""
    return Verifier(service.recorder, service.mapper, service.sealer.keys).verify_chat(chat_id)
