"""The Chat aggregate: state, and the commands that check invariants before recording."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.utils import register_topic

from interlock.domain import events as ev
from interlock.domain.decisions import (
    Entry,
    RespondEntry,
    RestartEntry,
    check_batch,
    check_entries,
    pending_call,
    respond_decision,
    restart_decision,
)
from interlock.domain.errors import (
    ForbiddenError,
    InvalidRequestError,
    NothingToRetryError,
    PendingInterruptsError,
    TurnInProgressError,
)
from interlock.domain.jsonsafe import check_json
from interlock.domain.messages import Message, Part
from interlock.domain.state import ChatState, ChatStatus, ToolCall
from interlock.domain.tools import Tool

_PLAIN_REF = re.compile(r"[\w.:\-]{1,80}")
Signer = Callable[[str | None, ev.ChatEvent], str]


class Chat:
    """One conversation between a client and an agent, as a stream of events."""

    Snapshot = ev.ChatSnapshot

    def __init__(self, chat_id: UUID, version: int, state: ChatState) -> None:
        self.id = chat_id
        self.version = version
        self.state = state
        self.pending_events: list[ev.ChatEvent] = []

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
        sealed = []
        for event in self.pending_events:
            tip = sign(tip, event)
            sealed.append(event.model_copy(update={"chain": tip}))
        self.pending_events = sealed
        self.state.chain_tip = tip

    # -- commands -------------------------------------------------------------------------------

    @classmethod
    def start(
        cls, agent: str, *, actor: str, tenant: str, metadata: dict[str, Any] | None = None
    ) -> Chat:
        check_json(metadata, "metadata")
        started = ev.ChatStarted(
            originator_id=uuid4(),
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

    def send_message(self, text: str, *, actor: str) -> None:
        if not text.strip():
            raise InvalidRequestError("message text is empty")
        check_json(text, "text")
        self._check_accepts_message()
        self._trigger(ev.UserMessageSent, text=text, actor=actor)

    def retry(
        self, *, actor: str, now: datetime, stale_after: timedelta, decider_only: bool = False
    ) -> None:
        """Continue a failed turn, or a running one whose lease expired (a crashed process).

        A running turn's lease is its last event plus `stale_after`; the process running
        it renews it with heartbeats while tools run. With `decider_only` (an approver who
        is not a requester) only a turn the actor's own decision started may be retried.
        """
        expired = self.state.status == "running" and now - self.state.updated_at >= stale_after
        if self.state.status != "failed" and not expired:
            raise NothingToRetryError(self.state.status)
        if decider_only and self.turn_decider() != actor:
            raise ForbiddenError(f"{actor} may only retry a turn their own decision started",
                                 principal=actor)
        self._trigger(ev.TurnRetried, actor=actor)

    def turn_decider(self) -> str | None:
        """Who made the latest decision of the current turn (it started what runs now)."""
        decided = [c for c in self.state.calls.values()
                   if c.turn == self.state.turn and c.decided_at is not None]
        latest = max(decided, key=lambda c: c.decided_at or self.state.created_at, default=None)
        return latest.decided_by if latest else None

    def heartbeat(self) -> None:
        """Renew a running turn's lease (its tools are still running)."""
        self._trigger(ev.TurnHeartbeat)

    def record_model_reply(self, message: Message, usage: dict[str, int] | None = None) -> None:
        """Record the model's reply with unique refs, and one ToolRequested per request."""
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
        tools: Mapping[str, Tool],
        request_key: str | None = None,
        request_sha256: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Validate the whole batch, then record one decision event per entry.

        `metadata` belongs to the resume as a whole (Genkit's `resume.metadata`): it is
        recorded on each decision event and given to restarted tools.
        """
        check_entries(respond, restart, metadata)
        if self.state.status == "running":
            raise TurnInProgressError()  # a restarted tool may be running: it must not run twice
        check_batch([e.ref for e in respond] + [e.ref for e in restart])
        decisions = [
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
        return [c for c in self.batch_calls() if c.status in ("requested", "restarted")]

    def needs_model(self) -> bool:
        return bool(self.state.messages) and self.state.messages[-1].role in ("user", "tool")

    # -- checks -----------------------------------------------------------------------------------

    def _check_accepts_message(self) -> None:
        if self.state.status == "running":
            raise TurnInProgressError()
        if self.state.status == "interrupted":
            raise PendingInterruptsError([c.ref for c in self.pending_interrupts()])

    def _pending(self, entry: Entry, actor: str, tools: Mapping[str, Tool]) -> ToolCall:
        return pending_call(self.state.calls, entry, actor, tools)

    def _with_unique_refs(self, message: Message) -> Message:
        """Keep the model's refs when new, unique and plain; otherwise assign `name-N`."""
        used = set(self.state.calls)
        parts: list[Part] = []
        for part in message.content:
            request = part.tool_request
            if request is not None and (request.ref in used or not _usable_ref(request.ref)):
                request = request.model_copy(update={"ref": self._fresh_ref(request.name, used)})
                part = part.model_copy(update={"tool_request": request})
            if request is not None:
                used.add(request.ref or "")
            parts.append(part)
        return message.model_copy(update={"content": parts})

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
