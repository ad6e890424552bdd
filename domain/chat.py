"""The Chat aggregate: state, and the commands that check invariants before recording."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.utils import register_topic
from pydantic import BaseModel, ConfigDict, Field

from domain import events as ev
from domain.canonical import sha256_hex
from domain.errors import (
    DuplicateRefError,
    EmptyResumeError,
    ForbiddenError,
    InterruptNameMismatchError,
    InterruptNotPendingError,
    InvalidToolInputError,
    InvalidToolOutputError,
    NothingToRetryError,
    PendingInterruptsError,
    StaleInterruptError,
    TurnInProgressError,
    UnknownInterruptError,
)
from domain.jsonsafe import check_json
from domain.messages import Message, Part
from domain.state import ChatState, ToolCall
from domain.tools import SchemaError, Tool

SHA256_HEX = r"^[0-9a-f]{64}$"


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
        check_json(text, "text")
        self._check_accepts_message()
        self._trigger(ev.UserMessageSent, text=text, actor=actor)

    def retry(self, *, actor: str, now: datetime, stale_after: timedelta) -> None:
        """Continue a failed turn, or one left running by a crashed process."""
        abandoned = self.state.status == "running" and now - self.state.updated_at >= stale_after
        if self.state.status != "failed" and not abandoned:
            raise NothingToRetryError(self.state.status)
        self._trigger(ev.TurnRetried, actor=actor)

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

    def record_interrupted(self, ref: str, metadata: dict[str, Any] | None) -> None:
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
    ) -> None:
        """Validate the whole batch, then record one decision event per entry."""
        check_entries(respond, restart)
        if self.state.status == "running":
            raise TurnInProgressError()  # a restarted tool may be running: it must not run twice
        self._check_batch([e.ref for e in respond] + [e.ref for e in restart])
        decisions = [
            *self._check_responds(respond, tools, actor),
            *self._check_restarts(restart, tools, actor),
        ]
        keyed = {"request_key": request_key, "request_sha256": request_sha256}
        for event_class, data in decisions:
            self._trigger(event_class, actor=actor, **keyed, **data)

    # -- queries ----------------------------------------------------------------------------------

    @property
    def status(self) -> str:
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

    @staticmethod
    def _check_batch(refs: list[str]) -> None:
        if not refs:
            raise EmptyResumeError()
        seen: set[str] = set()
        for ref in refs:
            if ref in seen:
                raise DuplicateRefError(ref)
            seen.add(ref)

    def _pending_call(
        self, entry: RespondEntry | RestartEntry, actor: str, tools: Mapping[str, Tool]
    ) -> ToolCall:
        """The interrupted call an entry decides, checked against what the entry claims."""
        call = self.state.calls.get(entry.ref)
        if call is None:
            raise UnknownInterruptError(entry.ref)
        if call.status != "interrupted":
            raise InterruptNotPendingError(
                entry.ref, call.decided_by, call.decided_at, call.decision
            )
        if call.name != entry.name:
            raise InterruptNameMismatchError(entry.ref, call.name, entry.name)
        _check_seen(entry, call)
        _check_approver(tools.get(entry.name), call, actor)
        return call

    def _check_responds(
        self, entries: Sequence[RespondEntry], tools: Mapping[str, Tool], actor: str
    ) -> list[tuple[type[ev.ChatEvent], dict[str, Any]]]:
        out: list[tuple[type[ev.ChatEvent], dict[str, Any]]] = []
        for entry in entries:
            call = self._pending_call(entry, actor, tools)
            tool = tools.get(entry.name)
            output = entry.output
            if tool is not None:
                try:
                    output = tool.validate_output(entry.output)
                except SchemaError as exc:
                    raise InvalidToolOutputError(entry.ref, entry.name, exc.errors) from None
            out.append(
                (
                    ev.Responded,
                    {
                        "ref": entry.ref,
                        "name": entry.name,
                        "output": output,
                        "metadata": entry.metadata,
                        "input_sha256": sha256_hex(call.input),
                    },
                )
            )
        return out

    def _check_restarts(
        self, entries: Sequence[RestartEntry], tools: Mapping[str, Tool], actor: str
    ) -> list[tuple[type[ev.ChatEvent], dict[str, Any]]]:
        out: list[tuple[type[ev.ChatEvent], dict[str, Any]]] = []
        for entry in entries:
            call = self._pending_call(entry, actor, tools)
            data: dict[str, Any] = {
                "ref": entry.ref,
                "name": entry.name,
                "resumed_metadata": entry.resumed_metadata,
                "original_input": call.input,
                "input_sha256": sha256_hex(call.input),
            }
            if "replace_input" in entry.model_fields_set:
                data["replace_input"] = self._replaced_input(entry, tools)
                data["replaced_input_sha256"] = sha256_hex(data["replace_input"])
            out.append((ev.Restarted, data))
        return out

    @staticmethod
    def _replaced_input(entry: RestartEntry, tools: Mapping[str, Tool]) -> Any:
        tool = tools.get(entry.name)
        if tool is None:
            return entry.replace_input
        try:
            return tool.validate_input(entry.replace_input).model_dump(mode="json")
        except SchemaError as exc:
            raise InvalidToolInputError(entry.ref, entry.name, exc.errors) from None

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


def _check_seen(entry: RespondEntry | RestartEntry, call: ToolCall) -> None:
    """A decision made on another input than the pending one is stale."""
    if entry.input_sha256 is not None and entry.input_sha256 != sha256_hex(call.input):
        raise StaleInterruptError(entry.ref, entry.input_sha256, sha256_hex(call.input))


def _check_approver(tool: Tool | None, call: ToolCall, actor: str) -> None:
    if tool is not None and tool.distinct_approver and actor == call.requested_by:
        raise ForbiddenError(
            f"{call.name} needs an approver other than {actor}, who sent the turn",
            ref=call.ref,
            actor=actor,
        )


def check_entries(respond: Sequence[RespondEntry], restart: Sequence[RestartEntry]) -> None:
    """Every value of a resume must be recordable as given (see domain.jsonsafe)."""
    for kind, entries in (("respond", respond), ("restart", restart)):
        for i, entry in enumerate(entries):
            check_json(dict(entry), f"{kind}[{i}]")


def _usable_ref(ref: str | None) -> bool:
    return ref is not None and _PLAIN_REF.fullmatch(ref) is not None


register_topic("interlock:Chat", Chat)
