"""The Chat aggregate: state, and the commands that check invariants before recording."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.utils import register_topic

from interlock.domain.chat import events as ev
from interlock.domain.chat.approval_events import (
    AgentFingerprinted,
    ApprovalEscalated,
    ApprovalRequested,
    InterruptExpired,
    InterruptWithdrawn,
)
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.erasure_events import ErasureBegun
from interlock.domain.chat.fork_events import ChatForked, ChatForkedTo
from interlock.domain.chat.jsonsafe import check_json
from interlock.domain.chat.messages import Message, Part
from interlock.domain.chat.policies import Approval, ApprovalTerms, Decider
from interlock.domain.chat.rules import (
    Decision,
    Entry,
    RespondEntry,
    RestartEntry,
    VoteEntry,
    check_batch,
    check_entries,
    check_voter,
    check_withdrawer,
    held_call,
    pending_call,
    respond_decision,
    restart_decision,
    vote_decision,
)
from interlock.domain.chat.schema import ToolSchema
from interlock.domain.chat.state import RUNNABLE, ChatState, ChatStatus, ToolCall
from interlock.domain.errors import (
    ChatErasedError,
    ForbiddenError,
    InterruptNotPendingError,
    InvalidRequestError,
    NothingToRetryError,
    PendingInterruptsError,
    TurnInProgressError,
    UnknownInterruptError,
)

_PLAIN_REF = re.compile(r"[\w.:\-]{1,80}")
Signer = Callable[[str | None, ev.ChatEvent], str]
Policies = Callable[[str], Approval | None]  # a tool's approval policy, by the tool's name


class Chat:
    """One conversation between a client and an agent, as a stream of events."""

    Snapshot = ev.ChatSnapshot

    def __init__(self, chat_id: UUID, version: int, state: ChatState) -> None:
        self.id = chat_id
        self.version = version
        self.state = state
        self.pending_events: list[ev.ChatEvent] = []
        # Sealed events of another stream that must commit with this chat's next commit, or
        # not at all (a delegated vote's fence: domain/delegations.py).
        self.companions: list[ev.ChatEvent] = []
        # (stream, version) pairs: the next commit is refused if one of those streams holds
        # an event at that version (a data policy book read for a hold has moved on since)
        self.guards: list[tuple[UUID, int]] = []
        self.snapshotted = 0  # the version of its latest snapshot, as far as this process knows

    # -- the eventsourcing aggregate protocol -------------------------------------------------

    def collect_events(self) -> list[ev.ChatEvent]:
        collected, self.pending_events = self.pending_events, []
        return collected

    def _trigger(self, event_class: type[ev.ChatEvent], **data: Any) -> None:
        event = event_class(
            originator_id=self.id,
            originator_version=self.version + 1,
            timestamp=ev.now(),
            **data,
        )
        event.mutate(self)
        self.pending_events.append(event)

    def seal(self, sign: Signer) -> None:
        """Chain each pending event to the one before it (tamper evidence)."""
        tip = self.state.chain_tip
        for event in self.pending_events:
            tip = sign(tip, event)
            # In place, as model_copy(update=) would set it: a pending event is this
            # aggregate's own until committed (a copy per event cost a tenth of sealing).
            event.__dict__["chain"] = tip
            event.__pydantic_fields_set__.add("chain")
        self.state.chain_tip = tip

    # -- commands -------------------------------------------------------------------------------

    @classmethod
    def start(
        cls, agent: str, *, actor: str, tenant: str, metadata: dict[str, Any] | None = None,
        chat_id: UUID | None = None,
    ) -> Chat:
        check_json(metadata, "metadata")
        started = ev.ChatStarted(
            originator_id=chat_id or uuid4(),
            originator_version=1,
            timestamp=ev.now(),
            agent=agent,
            tenant=tenant,
            actor=actor,
            metadata=metadata or {},
        )
        chat = started.mutate(None)
        chat.pending_events.append(started)
        return chat

    @classmethod
    def fork(cls, source: Chat, *, agent: str, actor: str) -> Chat:
        """A new chat of `source`'s tenant holding its history as of its version; a chat
        caught mid-turn there is refused (no process would be running that turn)."""
        source.check_not_erasing()
        if source.state.status == "running":
            raise InvalidRequestError(
                f"chat {source.id} was mid-turn at version {source.version}: fork at a "
                "version where it was idle, interrupted or failed", version=source.version)
        chat = cls.start(agent, actor=actor, tenant=source.state.tenant,
                         metadata=source.state.metadata)
        history = source.state.model_copy(update={"resume_keys": {}, "chain_tip": None},
                                          deep=True)
        chat._trigger(ChatForked, source_id=source.id, source_version=source.version,
                      actor=actor, history=history)
        return chat

    def record_fork(self, fork_id: UUID, version: int, *, actor: str) -> None:
        """Link this chat to a fork of its history up to `version`; refused once its
        erasure began (the fork would keep what the erasure destroys)."""
        self.check_not_erasing()
        self._check_not_running()
        self._trigger(ChatForkedTo, fork_id=fork_id, version=version, actor=actor)

    def begin_erasure(self, *, actor: str) -> bool:
        """Record that the chat's erasure begins (no fork of it from now on); False when
        it had begun already. A running turn's next commit fails: it must not outlive
        the key."""
        if self.state.erasing:
            return False
        self._trigger(ErasureBegun, actor=actor)
        return True

    def check_not_erasing(self) -> None:
        """Refuse a chat whose erasure began (ChatErasedError): from then on it takes no
        message, decision, retry, withdrawal or fork, and answers no earlier request again.
        Each would hand the chat's personal data on (to the model, to a fork, to the
        client) or record more of it. A server's chat cache may still hold the plaintext of
        a chat erased by another process: the command's read of the events since then
        brings `ErasureBegun`, and this refuses it before the model is asked."""
        if self.state.erasing:
            raise ChatErasedError(self.id)

    def send_message(self, text: str, *, actor: str, fingerprint: str | None = None) -> None:
        """Begin a turn with the user's message; `fingerprint`, the agent's that will run it,
        is recorded with it when it differs from the one last recorded."""
        if not text.strip():
            raise InvalidRequestError("message text is empty")
        check_json(text, "text")
        self.check_not_erasing()
        self._check_accepts_message()
        changed = fingerprint if fingerprint != self.state.fingerprint else None
        self._trigger(ev.UserMessageSent, text=text, actor=actor, fingerprint=changed)

    def retry(
        self, *, actor: str, now: datetime, stale_after: timedelta, decider_only: bool = False
    ) -> None:
        """Continue a failed turn, or a running one whose lease expired (a crashed process).

        A running turn's lease is its last event plus `stale_after`; the process running
        it renews it with heartbeats while tools run. With `decider_only` (an approver who
        is not a requester) only a turn the actor's own decision started may be retried.
        """
        self.check_not_erasing()
        expired = self.state.status == "running" and now - self.state.updated_at >= stale_after
        if self.state.status != "failed" and not expired:
            raise NothingToRetryError(self.state.status)
        if decider_only and self.turn_decider() != actor:
            raise ForbiddenError(f"{actor} may only retry a turn their own decision started",
                                 principal=actor)
        self._trigger(ev.TurnRetried, actor=actor)

    def turn_decider(self) -> str | None:
        """Who made the latest decision of the current turn (it started what runs now)."""
        decided = [c for c in self.state.calls.of_turn(self.state.turn)
                   if c.decided_at is not None]
        latest = max(decided, key=lambda c: c.decided_at or self.state.created_at, default=None)
        return latest.decided_by if latest else None

    def heartbeat(self) -> None:
        """Renew a running turn's lease (its tools are still running)."""
        self._trigger(ev.TurnHeartbeat)

    def record_model_reply(self, message: Message, usage: dict[str, int] | None = None) -> None:
        """Record the model's reply with unique refs, and one ToolRequested per request
        (the card's event: each request is a call from then on)."""
        message = self._with_unique_refs(message)
        self._trigger(ev.ModelResponded, message=message, usage=usage)
        for request in message.tool_requests:
            assert request.ref is not None
            self._trigger(ev.ToolRequested, ref=request.ref, name=request.name, input=request.input)

    def record_completed(self, ref: str, output: Any) -> None:
        self._trigger(ev.ToolCompleted, ref=ref, output=output)

    def record_failed(self, ref: str, error: str) -> None:
        self._trigger(ev.ToolFailed, ref=ref, error=error)

    def record_interrupted(self, ref: str, metadata: Any) -> None:
        self._trigger(ev.Interrupted, ref=ref, metadata=metadata)

    def finish_turn(self, reason: ev.FinishReason, error: str | None = None) -> None:
        self._trigger(ev.TurnFinished, reason=reason, error=error)

    def resume(
        self,
        respond: Sequence[RespondEntry],
        restart: Sequence[RestartEntry],
        *,
        actor: str,
        tools: Mapping[str, ToolSchema],
        request_key: str | None = None,
        request_sha256: str | None = None,
        metadata: dict[str, Any] | None = None,
        votes: Sequence[VoteEntry] = (),
        decider: Decider | None = None,
        now: datetime | None = None,
        policy: Policies | None = None,
    ) -> None:
        """Validate the whole batch, then record one decision event per entry.

        `metadata` belongs to the resume as a whole (Genkit's `resume.metadata`): it is
        recorded on each decision event and given to restarted tools. `votes` decide
        calls held for approval, by `decider` (an in-process caller is trusted);
        `policy` (a tool's policy by name) tells which stages an edited input goes through
        (without it, all of them).
        """
        self.check_not_erasing()
        check_entries(respond, restart, metadata)
        check_json([dict(v) for v in votes], "votes")
        if self.state.status == "running":
            raise TurnInProgressError()  # a restarted tool may be running: it must not run twice
        check_batch([e.ref for e in (*respond, *restart, *votes)])
        decider = decider or Decider.trusted(actor)
        if (respond or restart) and not decider.may_decide({"approver"}, set()):
            raise ForbiddenError(f"{decider.id} lacks the approver role", principal=decider.id,
                                 role="approver")
        decisions = [*self._vote_decisions(votes, decider, tools, now or ev.now(), policy),
            *(
                respond_decision(e, self._pending(e, actor, tools), tools.get(e.name))
                for e in respond
            ),
            *(
                restart_decision(e, self._pending(e, actor, tools), tools.get(e.name))
                for e in restart
            ),
        ]
        keyed = {
            "request_key": request_key,
            "request_sha256": request_sha256,
            "resume_metadata": metadata,
        }
        for event_class, data in decisions:
            self._trigger(event_class, actor=actor, **keyed, **data)

    def _vote_decisions(
        self, votes: Sequence[VoteEntry], decider: Decider, tools: Mapping[str, ToolSchema],
        now: datetime, policy: Policies | None,
    ) -> list[Decision]:
        decisions = []
        for entry in votes:
            call = held_call(self.state.calls, entry, now, decider.id)
            check_voter(call, decider)
            decisions.append(vote_decision(entry, call, tools.get(entry.name),
                                           policy(entry.name) if policy else None, decider))
        return decisions

    def hold_for_approval(self, ref: str, terms: ApprovalTerms) -> None:
        """Hold a requested call before it runs: its policy needs a yes."""
        call = self.state.calls[ref]
        self._trigger(ApprovalRequested, ref=ref, terms=terms, input_sha256=sha256_hex(call.input))

    def expire(self, ref: str, now: datetime) -> bool:
        """Fail a held call closed once its deadline passed; False when nothing is due."""
        call = self.state.calls.get(ref)
        expires_at = call.approval.current().expires_at if call and call.approval else None
        if call is None or not call.awaiting_approval or expires_at is None or now < expires_at:
            return False
        self._trigger(InterruptExpired, ref=ref, expires_at=expires_at,
                      input_sha256=sha256_hex(call.input))
        return True

    def escalate(self, ref: str, now: datetime) -> bool:
        """Widen who may decide once `escalate_after` passed; False when nothing is due."""
        call = self.state.calls.get(ref)
        approval = call.approval if call is not None else None
        if call is None or approval is None or not call.awaiting_approval or approval.escalated:
            return False
        escalate_at = approval.current().escalate_at
        if escalate_at is None or now < escalate_at:
            return False
        self._trigger(ApprovalEscalated, ref=ref)
        return True

    def withdraw(self, refs: Sequence[str], *, decider: Decider, reason: str) -> None:
        """Take pending requests back (all or nothing); the model is told why."""
        self.check_not_erasing()
        self._withdraw(refs, decider, reason)

    def _withdraw(self, refs: Sequence[str], decider: Decider, reason: str) -> None:
        if not reason.strip():
            raise InvalidRequestError("a withdrawal needs a reason")
        check_json(reason, "reason")
        check_json(list(refs), "refs")  # an unknown ref is named in the error: it must encode
        if self.state.status == "running":
            raise TurnInProgressError()
        check_batch(list(refs))
        for ref in refs:
            call = self.state.calls.get(ref)
            if call is None:
                raise UnknownInterruptError(ref)
            if call.status != "interrupted":
                raise InterruptNotPendingError(ref, call.decided_by, call.decided_at, call.decision)
            check_withdrawer(call, decider)
        for ref in refs:
            self._trigger(InterruptWithdrawn, ref=ref, actor=decider.id, reason=reason,
                          input_sha256=sha256_hex(self.state.calls[ref].input))

    def close_pending(self, *, actor: str, reason: str) -> list[str]:
        """Withdraw every pending call as `actor` (an operator's act, as an admin) and end
        the turn without calling the model; the refs withdrawn. Before an erasure: once the
        chat's key is gone, nothing that carries personal data (a vote, a model's answer) can
        be recorded, so what is left pending would wait in the inbox for ever (D31)."""
        refs = [c.ref for c in self.pending_interrupts()]
        if self.state.status != "interrupted" or not refs:
            return []
        # An erase run again after its beginning was recorded still closes them: its own act.
        self._withdraw(refs, Decider(actor, frozenset({"admin"})), reason)
        self.finish_turn("stop")
        return refs

    def record_fingerprint(self, fingerprint: str) -> None:
        """Record the agent's fingerprint when it differs from the one last recorded."""
        if self.state.fingerprint != fingerprint:
            self._trigger(AgentFingerprinted, fingerprint=fingerprint)

    # -- queries ----------------------------------------------------------------------------------

    @property
    def status(self) -> ChatStatus:
        return self.state.status

    def pending_interrupts(self) -> list[ToolCall]:
        return [c for c in self.batch_calls() if c.status == "interrupted"]

    def batch_calls(self) -> list[ToolCall]:
        return [self.state.calls[ref] for ref in self.state.batch]

    def runnable_calls(self) -> list[ToolCall]:
        """Calls of the current reply that must run now (new requests and restarts)."""
        return [c for c in self.batch_calls() if c.status in RUNNABLE]

    def needs_model(self) -> bool:
        return bool(self.state.messages) and self.state.messages[-1].role in ("user", "tool")

    # -- checks -----------------------------------------------------------------------------------

    def _check_not_running(self) -> None:
        if self.state.status == "running":
            raise TurnInProgressError()  # an event now would make the running turn's commit fail

    def _check_accepts_message(self) -> None:
        if self.state.status == "running":
            raise TurnInProgressError()
        if self.state.status == "interrupted":
            raise PendingInterruptsError([c.ref for c in self.pending_interrupts()])

    def _pending(self, entry: Entry, actor: str, tools: Mapping[str, ToolSchema]) -> ToolCall:
        return pending_call(self.state.calls, entry, actor, tools)

    def _with_unique_refs(self, message: Message) -> Message:
        """Keep the model's refs when new, unique and plain; otherwise assign `name-N`."""
        used = set(self.state.calls)
        parts: list[Part] = []
        for part in message.content:
            request = part.tool_request
            if request is not None and (request.ref in used or not _usable_ref(request.ref)):
                request = request.replaced(ref=self._fresh_ref(request.name, used))
                part = part.replaced(tool_request=request)
            if request is not None:
                used.add(request.ref or "")
            parts.append(part)
        return message.replaced(content=parts)

    @staticmethod
    def _fresh_ref(name: str, used: set[str]) -> str:
        stem = re.sub(r"[^\w.:\-]", "_", name)[:40] or "call"
        n = len(used) + 1
        while f"{stem}-{n}" in used:
            n += 1
        return f"{stem}-{n}"


def _usable_ref(ref: str | None) -> bool:
    return ref is not None and _PLAIN_REF.fullmatch(ref) is not None


register_topic("interlock:Chat", Chat)
