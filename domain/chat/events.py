"""The Chat aggregate's events: past-tense facts whose `apply` only assigns.

Every event class is stored under the stable topic `interlock:<ClassName>`, so moving
this module does not orphan stored events. A renamed class must register its old
topic (`eventsourcing.utils.register_topic`); a changed payload bumps `class_version`
and adds an `upcast_vN_vN+1(state)` static method.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Final
from uuid import UUID

from eventsourcing.domain import OriginatorVersionError
from eventsourcing.utils import register_topic, resolve_topic
from pydantic import BaseModel, ConfigDict

from interlock.domain.chat.messages import Message, text_message
from interlock.domain.chat.state import ChatState, ChatStatus, FinishReason, ToolCall

if TYPE_CHECKING:
    from interlock.domain.chat.aggregate import Chat

__all__ = ["STATUS_AFTER", "FinishReason"]  # FinishReason was defined here before state.py
# The chat's status once a turn finishes for each reason; the read side applies it too.
STATUS_AFTER: Final[Mapping[FinishReason, ChatStatus]] = {
    "stop": "idle",
    "max_turns": "idle",
    "interrupted": "interrupted",
    "failed": "failed",
}


def _aggregate() -> type[Chat]:
    """The Chat class, by its stable topic: the aggregate's module imports this one."""
    return resolve_topic("interlock:Chat")  # type: ignore[no-any-return]


def now() -> datetime:
    return datetime.now(UTC)


class ChatEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    TOPIC: ClassVar[str] = ""
    class_version: ClassVar[int] = 1
    makes_call: ClassVar[bool] = False  # it records a call, rather than changing one

    originator_id: UUID
    originator_version: int
    timestamp: datetime
    chain: str | None = None

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.TOPIC = f"interlock:{cls.__name__}"
        register_topic(cls.TOPIC, cls)

    def mutate(self, chat: Chat | None) -> Chat:
        assert chat is not None, "only ChatStarted may begin a chat"
        if self.originator_version != chat.version + 1:
            raise OriginatorVersionError(self.originator_version, chat.version + 1)
        if not (chat.state.forgotten and self._of_a_forgotten_call(chat.state)):
            self.apply(chat.state)
        chat.version = self.originator_version
        chat.state.updated_at = self.timestamp
        if self.chain is not None:
            chat.state.chain_tip = self.chain
        return chat

    def apply(self, state: ChatState) -> None:
        """Change the state; deterministic, runs again on every replay."""

    def _of_a_forgotten_call(self, state: ChatState) -> bool:
        """About a call of an erased fork's copied history, which the fork no longer has."""
        ref = getattr(self, "ref", None)
        return ref is not None and not self.makes_call and ref not in state.calls


class ChatStarted(ChatEvent):
    agent: str
    tenant: str
    actor: str
    metadata: dict[str, Any] = {}

    def mutate(self, chat: Chat | None) -> Chat:
        state = ChatState(
            agent=self.agent,
            tenant=self.tenant,
            started_by=self.actor,
            metadata=self.metadata,
            created_at=self.timestamp,
            updated_at=self.timestamp,
            chain_tip=self.chain,
        )
        return _aggregate()(self.originator_id, self.originator_version, state)


class UserMessageSent(ChatEvent):
    """A user's message, which begins a turn; with the agent's fingerprint when the turn
    runs under a definition other than the one last recorded (a chat's first turn always),
    which was an `AgentFingerprinted` event of its own before (still read, and still
    recorded when a resume or a retry finds the definition changed)."""

    # Fields added after the chain's format 1: a format 1 record never holds them.
    LATER_FIELDS: ClassVar[frozenset[str]] = frozenset({"fingerprint"})

    text: str
    actor: str
    fingerprint: str | None = None

    def apply(self, state: ChatState) -> None:
        if self.fingerprint is not None:
            state.fingerprint = self.fingerprint
        state.messages.append(text_message("user", self.text))
        state.status = "running"
        state.turn += 1
        state.turn_by = self.actor
        state.finish_reason = None
        state.error = None


class TurnRetried(ChatEvent):
    actor: str

    def apply(self, state: ChatState) -> None:
        state.status = "running"
        state.error = None


class TurnHeartbeat(ChatEvent):
    """The process running the turn is alive: renews the turn's lease (its updated_at)."""


class Requested(BaseModel):
    """A tool request named by a reply recorded in the form some chats have (Dec 2026,
    `ModelResponded.requests`): its ref and tool in the clear, its input in the message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    name: str


class ModelResponded(ChatEvent):
    """The model's reply; each tool request it makes follows it as a ToolRequested event.

    `requests` is None but in replies of the chats recorded while a reply carried its
    requests itself (no ToolRequested followed them): those still apply their calls, and
    read sides see them as the ToolRequested events they stand for (`requested_calls`).
    """

    message: Message
    usage: dict[str, int] | None = None
    requests: list[Requested] | None = None

    def apply(self, state: ChatState) -> None:
        state.messages.append(self.message)
        state.batch = []
        state.batch_closed = False
        for call in self.calls():
            call.apply(state)

    def calls(self) -> list[ToolRequested]:
        """A carried reply's requests as ToolRequested events: each with its input from the
        message (None once the chat is erased), at this reply's version. [] for the rest."""
        if not self.requests:
            return []
        inputs = {r.ref: r.input for r in self.message.tool_requests}
        return [ToolRequested.model_construct(
            originator_id=self.originator_id, originator_version=self.originator_version,
            timestamp=self.timestamp, chain=None, ref=r.ref, name=r.name,
            input=inputs.get(r.ref)) for r in self.requests]


class ToolRequested(ChatEvent):
    """A tool request of the reply before it: a call from now on, held, run or answered.
    `input` is personal data (domain/storage/erasure.py)."""

    makes_call: ClassVar[bool] = True

    ref: str
    name: str
    input: Any = None

    def apply(self, state: ChatState) -> None:
        state.calls[self.ref] = ToolCall(
            ref=self.ref,
            name=self.name,
            input=self.input,
            turn=state.turn,
            requested_at=self.timestamp,
            requested_by=state.turn_by,
        )
        state.batch.append(self.ref)


def requested_calls(events: Iterable[ChatEvent]) -> Iterator[ChatEvent]:
    """`events`, each reply that carries its requests (`ModelResponded.requests`, old logs
    only) followed by the ToolRequested events it stands for: every chat in one form."""
    for event in events:
        yield event
        if isinstance(event, ModelResponded) and event.requests:
            yield from event.calls()


class ToolCompleted(ChatEvent):
    ref: str
    output: Any = None

    def apply(self, state: ChatState) -> None:
        call = state.calls[self.ref]
        call.status, call.output = "completed", self.output
        state.close_batch_if_resolved()


class ToolFailed(ChatEvent):
    ref: str
    error: str

    def apply(self, state: ChatState) -> None:
        call = state.calls[self.ref]
        call.status, call.error = "failed", self.error
        state.close_batch_if_resolved()


class Interrupted(ChatEvent):
    """`metadata` is the interrupt's payload: any JSON value (an object before, so still v1)."""

    ref: str
    metadata: Any = None

    def apply(self, state: ChatState) -> None:
        call = state.calls[self.ref]
        call.status, call.interrupt, call.interrupted_at = (
            "interrupted",
            self.metadata,
            self.timestamp,
        )


class Responded(ChatEvent):
    """v2 adds `resume_metadata`, the metadata of the whole resume this entry came in."""

    class_version: ClassVar[int] = 2

    ref: str
    name: str
    output: Any = None
    metadata: dict[str, Any] | None = None
    resume_metadata: dict[str, Any] | None = None
    actor: str
    input_sha256: str
    request_key: str | None = None
    request_sha256: str | None = None
    as_part: bool | None = None  # given as a raw Genkit part (None: by the respond builder)

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["resume_metadata"] = None

    def apply(self, state: ChatState) -> None:
        state.remember_key(self.request_key, self.request_sha256, self.originator_version)
        call = state.calls[self.ref]
        call.status, call.output = "responded", self.output
        if self.as_part:  # Genkit passes a raw part through as it is
            call.response_metadata = self.metadata or {}
        elif self.metadata is not None:  # respondTool: interruptResponse: metadata ?? true
            call.response_metadata = {"interruptResponse": self.metadata}
        call.resume_metadata = self.resume_metadata  # read back as the tool message's `resumed`
        call.decision, call.decided_by, call.decided_at = "respond", self.actor, self.timestamp
        state.status = "running"
        state.close_batch_if_resolved()


class Restarted(ChatEvent):
    """v2 adds `resume_metadata`, the metadata of the whole resume this entry came in."""

    class_version: ClassVar[int] = 2

    ref: str
    name: str
    resumed_metadata: dict[str, Any] | None = None
    resume_metadata: dict[str, Any] | None = None
    original_input: Any = None
    replace_input: Any = None
    actor: str
    input_sha256: str
    replaced_input_sha256: str | None = None
    request_key: str | None = None
    request_sha256: str | None = None

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["resume_metadata"] = None

    def apply(self, state: ChatState) -> None:
        state.remember_key(self.request_key, self.request_sha256, self.originator_version)
        call = state.calls[self.ref]
        call.status, call.attempt = "restarted", call.attempt + 1
        call.resumed, call.resume_metadata = self.resumed_metadata or {}, self.resume_metadata
        call.decision, call.decided_by, call.decided_at = "restart", self.actor, self.timestamp
        if self.replaced_input_sha256 is not None:
            call.original_input, call.input = self.original_input, self.replace_input
            call.input_by = self.actor  # the four-eyes rule now counts them as the requester
        state.status = "running"


class TurnFinished(ChatEvent):
    reason: FinishReason
    error: str | None = None

    def apply(self, state: ChatState) -> None:
        state.status = STATUS_AFTER[self.reason]
        state.finish_reason = self.reason
        state.error = self.error


class ChatSnapshot(BaseModel):
    """The whole state at a version; loading starts here instead of at event 1."""

    model_config = ConfigDict(frozen=True)
    TOPIC: ClassVar[str] = "interlock:ChatSnapshot"
    class_version: ClassVar[int] = 1

    originator_id: UUID
    originator_version: int
    timestamp: datetime
    topic: str = "interlock:Chat"
    state: ChatState

    @classmethod
    def take(cls, chat: Chat) -> ChatSnapshot:
        return cls(
            originator_id=chat.id,
            originator_version=chat.version,
            timestamp=now(),
            state=chat.state,
        )

    def mutate(self, _: Chat | None) -> Chat:
        return _aggregate()(self.originator_id, self.originator_version, self.state)


register_topic(ChatSnapshot.TOPIC, ChatSnapshot)
