"""The application: the eventsourcing Application the use cases share (one store, one
repository, one append), and the wiring of the services of `domain/services/`.

The documented entry points (`start_chat`, `open_chat`, `send`, `resume`, `retry`, `withdraw`,
`fork`, `get_chat`, `agent`) stay here as thin doors that build a command and call its service.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, TypeVar
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import Mapper, Transcoder

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.events import ChatEvent, now
from interlock.domain.chat.policies import Decider
from interlock.domain.chat.rules import RespondEntry, RestartEntry, VoteEntry
from interlock.domain.errors import ConfigurationError, InvalidRequestError, UnknownAgentError
from interlock.domain.limits import Limits
from interlock.domain.lost_answers import CutTurns
from interlock.domain.results import TurnResult
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.models import Model
from interlock.domain.runtime.tracing import Tracer
from interlock.domain.runtime.turns import Emit
from interlock.domain.services.channels import TenantChannels
from interlock.domain.services.commands import (
    ABANDONED_AFTER,
    OpenChat,
    Resume,
    Retry,
    Send,
    StartChat,
    Withdraw,
)
from interlock.domain.services.forks import Forks
from interlock.domain.services.io import IoThreads
from interlock.domain.services.keys import PersonalData
from interlock.domain.services.threads import Threads
from interlock.domain.services.turns import Turns
from interlock.domain.services.webhooks import Webhooks
from interlock.domain.storage.cache import ChatCache
from interlock.domain.storage.erasure import FieldCipher
from interlock.domain.storage.keys import Keyring
from interlock.domain.storage.mapper import PydanticMapper, Sealer
from interlock.domain.storage.repository import ChatRepository, CommitListener
from interlock.domain.storage.snapshots import SnapshotStore

__all__ = ["ABANDONED_AFTER", "DEV_SECRET", "IN_MEMORY", "Interlock"]

DEV_SECRET = b"interlock-dev-secret-change-me"
IN_MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
ModelResolver = Callable[[str], Model]
T = TypeVar("T")


class Interlock(Application[UUID]):
    """Chats with agents whose tools may interrupt; every step is an event."""

    name = "Interlock"
    # No snapshots: they sat outside the chain, grew quadratically and were taken on the
    # request path; the mapper refuses to read one (docs/audit.md, "Snapshots").
    snapshotting_intervals: ClassVar[dict[Any, int]] = {}
    tracer: Tracer | None = None  # the edge sets one when tracing is configured
    mapper: PydanticMapper
    limits = Limits()  # the edge sets the configured ones (domain/limits.py)

    def __init__(
        self,
        agents: Sequence[Agent] = (),
        *,
        env: Mapping[str, str] | None = None,
        secret: bytes | Keyring | None = None,
        resolve_model: ModelResolver | None = None,
        io_threads: int = 64,
        cache: ChatCache | None = None,
    ) -> None:
        """`env` is eventsourcing's (memory if none); `secret` keys the event chain (a Keyring
        names the active key and older ones that still verify), else the public DEV_SECRET."""
        super().__init__(dict(env or IN_MEMORY))
        self.agents = {a.name: a for a in agents}
        self.sealer = Sealer(secret or DEV_SECRET)
        self.mapper.keys = self.sealer.keys  # loads refuse a retired key's late seals
        self.models = {a.name: _model(a, resolve_model) for a in agents}
        # Blocking store work of turns runs here (see IoThreads.off_loop).
        self.io = IoThreads(io_threads)
        self.store = ChatRepository(self, self.mapper, self.sealer, cache)
        self.chats = self.store.cache
        self.keys = PersonalData(self.mapper, self.sealer)
        self.cut_turns = CutTurns()  # resumes a store failure stopped (their key's retry goes on)
        self.turns = Turns(self, self.store, self.io, clock=_clock)
        self.forks = Forks(self.store, self.keys, self.agent, lambda: self.limits)
        self.threads = Threads(self.store, self.sealer, self.turns.start)
        self.channels = TenantChannels(self.store, self.sealer)
        self.webhooks = Webhooks(self.store, self.sealer)

    def construct_mapper(self) -> Mapper[UUID]:
        return PydanticMapper(
            transcoder=_NoTranscoder(),
            compressor=self.factory.compressor(),
            cipher=self.factory.cipher(),
        )

    def protect_personal_data(self, cipher: FieldCipher) -> None:
        """Store personal fields encrypted under erasable per-chat keys, and read them back."""
        self.keys.protect(cipher)

    # -- the documented doors: each builds its command ---------------------------------------

    def start_chat(self, agent: str, *, actor: str, tenant: str = "default",
                   metadata: dict[str, Any] | None = None, chat_id: UUID | None = None) -> Chat:
        """A new chat; with `chat_id` (a server-made id), ConcurrencyError if it exists."""
        return self.turns.start(StartChat(agent=agent, actor=actor, tenant=tenant,
                                          metadata=metadata, chat_id=chat_id))

    async def open_chat(self, agent: str, text: str, *, actor: str, tenant: str = "default",
                        metadata: dict[str, Any] | None = None, max_turns: int | None = None,
                        emit: Emit | None = None, idempotency_key: str | None = None) -> Chat:
        """`start_chat` then `send` in one step, recorded together (`Turns.open`)."""
        return await self.turns.open(OpenChat(
            agent=agent, actor=actor, tenant=tenant, metadata=metadata, text=text,
            max_turns=max_turns, idempotency_key=idempotency_key), emit)

    async def send(self, chat_id: UUID, text: str, *, actor: str, tenant: str | None = None,
                   emit: Emit | None = None, max_turns: int | None = None) -> TurnResult:
        """Send a user message and run the turn; `max_turns` overrides the agent's budget."""
        return await self.turns.send(Send(chat_id=chat_id, text=text, actor=actor,
                                          tenant=tenant, max_turns=max_turns), emit)

    async def resume(
        self, chat_id: UUID, *, respond: Sequence[RespondEntry] = (),
        restart: Sequence[RestartEntry] = (), actor: str, tenant: str | None = None,
        emit: Emit | None = None, idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None, max_turns: int | None = None,
        votes: Sequence[VoteEntry] = (), decider: Decider | None = None,
    ) -> TurnResult:
        """Decide pending interrupts and continue the turn (the fields: `Resume`)."""
        return await self.turns.resume(Resume(
            chat_id=chat_id, actor=actor, respond=respond, restart=restart, votes=votes,
            tenant=tenant, idempotency_key=idempotency_key, metadata=metadata,
            max_turns=max_turns, decider=decider), emit)

    async def retry(
        self, chat_id: UUID, *, actor: str, tenant: str | None = None,
        emit: Emit | None = None, stale_after: timedelta = ABANDONED_AFTER,
        max_turns: int | None = None, decider_only: bool = False,
    ) -> TurnResult:
        """Continue from the last recorded step; completed tools never run again (`Retry`)."""
        return await self.turns.retry(Retry(
            chat_id=chat_id, actor=actor, tenant=tenant, stale_after=stale_after,
            max_turns=max_turns, decider_only=decider_only), emit)

    async def withdraw(self, chat_id: UUID, refs: Sequence[str], *, reason: str,
                       decider: Decider, tenant: str | None = None,
                       emit: Emit | None = None) -> TurnResult:
        """Take pending requests back; the model is told, and the chat goes on."""
        return await self.turns.withdraw(Withdraw(
            chat_id=chat_id, refs=refs, reason=reason, decider=decider, tenant=tenant), emit)

    async def expire_due(self, chat_id: UUID, ref: str, chat: Chat | None = None, *,
                         at: datetime | None = None) -> Literal["expired", "escalated", ""]:
        """Escalate or expire one held call if due (the sweeper's command; `Turns`)."""
        return await self.turns.expire_due(chat_id, ref, chat, at=at)

    def fork(self, chat_id: UUID, version: int, *, actor: str, tenant: str | None = None,
             agent: str | None = None) -> Chat:
        """A new chat holding the chat's history up to `version` (`Forks.fork`)."""
        return self.forks.fork(chat_id, version, actor=actor, tenant=tenant, agent=agent)

    def begin_erasure(self, chat_id: UUID, *, actor: str, attempts: int = 50) -> list[UUID]:
        """Record that the chat's erasure begins; its forks (`Forks.begin_erasure`)."""
        return self.forks.begin_erasure(chat_id, actor=actor, attempts=attempts)

    # -- the shared store: reads, the one append, the position -------------------------------

    def agent(self, name: str) -> Agent:
        try:
            return self.agents[name]
        except KeyError:
            raise UnknownAgentError(name) from None

    def get_chat(self, chat_id: UUID, *, version: int | None = None,
                 tenant: str | None = None) -> Chat:
        """The chat now, or as of event `version`; another tenant's chat does not exist."""
        return self.store.get(chat_id, version=version, tenant=tenant)

    def get_chats(self, chat_ids: Sequence[UUID]) -> dict[UUID, Chat]:
        """These chats as they are now, read together (an id that does not load is left out)."""
        return self.store.get_many(chat_ids)

    def chat_events(self, chat_id: UUID, *, tenant: str | None = None, after: int = 0,
                    limit: int | None = None) -> list[ChatEvent]:
        """The chat's events after version `after` (at most `limit`), oldest first."""
        return self.store.events_of(chat_id, tenant=tenant, after=after, limit=limit)

    def commit(self, chat: Chat) -> int | None:
        """Seal and append the chat's new events at the expected version; the position."""
        return self.store.commit(chat)

    def save_stream(self, stream_id: UUID, events: Sequence[Any]) -> int:
        """Append sealed events of a non-chat stream: the last's position; ConcurrencyError."""
        position = self.store.append(stream_id, events)
        if position is None:
            raise InvalidRequestError(f"nothing to append to {stream_id}")
        return position

    def position(self) -> int:
        """The last event's notification id (0: none): what a reader waits for."""
        return self.recorder.max_notification_id() or 0

    async def off_loop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking store work on the I/O threads when commands are under way."""
        return await self.io.off_loop(fn, *args, **kwargs)

    @property
    def snapshot_store(self) -> SnapshotStore | None:
        return self.store.snapshots

    @snapshot_store.setter
    def snapshot_store(self, snapshots: SnapshotStore | None) -> None:
        self.store.snapshots = snapshots

    @property
    def commit_listeners(self) -> list[CommitListener]:
        """Called after each commit: in-process read models catch up there (read-your-writes)."""
        return self.store.listeners

    def close(self) -> None:
        self.io.close()
        super().close()


def _clock() -> datetime:
    """The services' clock: this module's `now`, read at each call (tests move it on)."""
    return now()


def _model(agent: Agent, resolve: ModelResolver | None) -> Model:
    if not isinstance(agent.model, str):
        return agent.model
    if resolve is None:
        raise ConfigurationError(
            f"agent {agent.name} names model {agent.model!r} but no provider resolver is set"
            " (pip install -e '.[providers]')"
        )
    return resolve(agent.model)


class _NoTranscoder(Transcoder):
    """The pydantic mapper serialises by itself; the library still wants a transcoder."""

    def encode(self, obj: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError
