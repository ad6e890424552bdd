"""The repository every use case shares: loads chats (from a sealed snapshot and the events
after it, else from the log), lends them to one command at a time, and appends sealed events
(a chat's, several chats' together, or a stream that is no chat) through one path."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.domain import OriginatorVersionError
from eventsourcing.persistence import EventStore, IntegrityError, PersistenceError, Recording

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.events import ChatEvent, ChatStarted
from interlock.domain.errors import (
    ChatNotFoundError,
    ConcurrencyError,
    InterlockError,
    InvalidRequestError,
)
from interlock.domain.storage import snapshots
from interlock.domain.storage.cache import ChatCache
from interlock.domain.storage.mapper import PydanticMapper, Sealer
from interlock.domain.storage.snapshots import SnapshotStore

CommitListener = Callable[[list[Recording[UUID]]], None]


class ChatRepository:
    """Chats in an eventsourcing application's store, sealed by `sealer`."""

    def __init__(self, app: Application[UUID], mapper: PydanticMapper, sealer: Sealer,
                 cache: ChatCache | None = None) -> None:
        self._app, self._mapper, self._sealer = app, mapper, sealer
        self.events: EventStore[UUID] = app.events  # any stream's events, by id
        self.cache = cache or ChatCache()
        self.snapshots: SnapshotStore | None = None  # the edge attaches one (interlock/stores)
        self.listeners: list[CommitListener] = []  # in-process read models catch up here

    # -- loading -----------------------------------------------------------------------------

    def get(self, chat_id: UUID, *, version: int | None = None,
            tenant: str | None = None) -> Chat:
        """The chat now, or as of event `version`; another tenant's chat does not exist."""
        chat = self._from_snapshot(chat_id, version)
        if chat is None:
            try:
                chat = self._app.repository.get(chat_id, version=version, projector_func=replay)
            except AggregateNotFoundError:
                raise ChatNotFoundError(chat_id) from None
        if not isinstance(chat, Chat):  # a stream of another kind (a review) under this id
            raise ChatNotFoundError(chat_id)
        if tenant is not None and chat.state.tenant != tenant:
            raise ChatNotFoundError(chat_id)
        if version is not None and chat.version < version:
            raise InvalidRequestError(
                f"chat {chat_id} has {chat.version} events; there is no version {version}",
                version=version, latest=chat.version)
        return chat

    def get_many(self, chat_ids: Sequence[UUID]) -> dict[UUID, Chat]:
        """These chats as they are now, read together where the store can (one query on
        PostgreSQL); an id with no chat, or one whose log does not load, is left out (its
        own load, `get`, then says why)."""
        if self._mapper.personal is not None:
            self._mapper.personal.warm(chat_ids)
        many = getattr(self._app.recorder, "select_events_of", None)
        if many is None:
            found = {}
            for chat_id in chat_ids:
                with suppress(InterlockError, OriginatorVersionError):
                    found[chat_id] = self.get(chat_id)
            return found
        found = self._from_snapshots(chat_ids)
        to_event = self._mapper.to_domain_event
        for chat_id, stored in many([c for c in chat_ids if c not in found]).items():
            try:
                chat = replay(None, map(to_event, stored))
            except (InterlockError, OriginatorVersionError):
                continue  # a refused record sinks its own chat's load, not the page's
            if isinstance(chat, Chat):
                found[chat_id] = chat
        return found

    def events_of(self, chat_id: UUID, *, tenant: str | None = None, after: int = 0,
                  limit: int | None = None) -> list[ChatEvent]:
        """The chat's events after version `after` (at most `limit`), oldest first.

        Whose chat it is comes from its first event alone, read before the rest: another
        tenant's chat is refused in the same time whatever its size.
        """
        first = list(self._app.events.get(chat_id, lte=1))
        started = first[0] if first else None
        if not isinstance(started, ChatStarted) or tenant not in (None, started.tenant):
            raise ChatNotFoundError(chat_id)
        return list(self._app.events.get(chat_id, gt=after, limit=limit))  # type: ignore[arg-type]

    def checkout(self, chat_id: UUID, tenant: str | None) -> Chat:
        """The chat for a command: the cached one brought up to date, or loaded whole."""
        chat = self.cache.take(chat_id)
        if chat is None:
            return self.get(chat_id, tenant=tenant)
        newer = self._app.events.get(chat_id, gt=chat.version)  # others' writes: one indexed read
        chat = replay(chat, newer) or chat
        if tenant is not None and chat.state.tenant != tenant:
            raise ChatNotFoundError(chat_id)
        return chat

    def checkin(self, chat: Chat) -> None:
        """The command is over and all it recorded committed: later commands may reuse it."""
        self.cache.give(chat)

    def _from_snapshot(self, chat_id: UUID, version: int | None,
                       kept: snapshots.Snapshot | None = None) -> Chat | None:
        """The chat from its sealed snapshot (`kept`, else read) and the events after it;
        None: read the log."""
        store = self.snapshots
        if kept is None and store is not None:
            kept = store.get(chat_id)
        if store is None or kept is None or (version is not None and kept.version > version):
            return None
        try:
            return snapshots.resume(kept, self._sealer.keys, self._mapper.personal,
                                    self._app.events.get(chat_id, gt=kept.version - 1,
                                                         lte=version))
        except snapshots.SnapshotRefusedError as exc:
            snapshots.warn_once(exc)  # the log is the truth: the chat still loads
            with suppress(PersistenceError):
                store.delete([chat_id])  # so that its next snapshot can take the place
            return None

    def _from_snapshots(self, chat_ids: Sequence[UUID]) -> dict[UUID, Chat]:
        """Those of these chats that have a snapshot, loaded from it (one read for all)."""
        found: dict[UUID, Chat] = {}
        if self.snapshots is None:
            return found
        for chat_id, kept in self.snapshots.get_many(chat_ids).items():
            with suppress(InterlockError, OriginatorVersionError):
                if (chat := self._from_snapshot(chat_id, None, kept)) is not None:
                    found[chat_id] = chat
        return found

    # -- committing --------------------------------------------------------------------------

    def commit(self, chat: Chat) -> int | None:
        """Seal and append the chat's new events at the expected version; the position."""
        if not chat.pending_events:
            guards, chat.guards = chat.guards, []
            self._check_guards(chat.id, guards)
            return None
        tip = chat.state.chain_tip
        chat.seal(self._sealer.sign)
        events = chat.collect_events()
        companions, chat.companions = chat.companions, []
        guards, chat.guards = chat.guards, []
        try:
            recordings = self._write([*events, *companions], chat.id, {chat.id: chat},
                                     guards)
        except ConcurrencyError:
            raise
        except BaseException:
            # nothing was written: keep the events pending so the turn can still record its end
            chat.pending_events, chat.state.chain_tip = events + chat.pending_events, tip
            chat.companions, chat.guards = companions + chat.companions, guards + chat.guards
            raise
        position = self._tell(recordings)
        self._snapshot(chat)
        return position

    def commit_together(self, chats: Sequence[Chat]) -> None:
        """Seal each chat's new events in its chain and append them all in one transaction."""
        events: list[Any] = []
        for chat in chats:
            chat.seal(self._sealer.sign)
            events.extend(chat.collect_events())
        self._tell(self._write(events, chats[-1].id, {chat.id: chat for chat in chats}))

    def stream(self, stream_id: UUID) -> list[Any]:
        """The events of a stream that is no chat (a tenant's delegations), oldest first."""
        return list(self._app.events.get(stream_id))

    def sign(self, tip: str | None, event: Any) -> str:
        """The chain link of `event` after `tip` (a stream's events are sealed like a chat's)."""
        return self._sealer.sign(tip, event)

    def append(self, stream_id: UUID, events: Sequence[Any]) -> int | None:
        """Append a stream's sealed events that is no chat (a review, a subscription, a
        tenant's channels, a call's receipts): the position of the last (None: nothing to
        write); ConcurrencyError if another write took its version first."""
        return self._tell(self._write(events, stream_id))

    @property
    def guards_supported(self) -> bool:
        """Whether an append can be refused by another stream's version (`Chat.guards`):
        the PostgreSQL store's group append checks them in its transaction."""
        return getattr(self._app.recorder, "append_guards", False) is True

    def _write(self, events: Sequence[Any], conflict_id: UUID,
               aggregates: dict[UUID, Any] | None = None,
               guards: Sequence[tuple[UUID, int]] = ()) -> list[Recording[UUID]]:
        """The one append of the house: `events` in one transaction."""
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        processing.events.extend(events)  # the library's save() does costly
        processing.aggregates.update(aggregates or {})  # runtime Protocol checks; same steps
        if guards:
            processing.saved_kwargs["guards"] = guards
        try:
            return self._app._record(processing)
        except IntegrityError:
            raise ConcurrencyError(conflict_id) from None

    def _check_guards(self, chat_id: UUID, guards: Sequence[tuple[UUID, int]]) -> None:
        """Guards with no event to append: no append checks them, so they are read. A hold
        judged after the call's request was committed (an earlier tool's outcome first) has
        nothing left to append before its tool runs, and must still be refused (a
        ConcurrencyError, as the append's) if its policies moved since they were read."""
        for stream, version in guards:
            if list(self._app.events.get(stream, gt=version - 1, limit=1)):
                raise ConcurrencyError(chat_id)

    def _tell(self, recordings: list[Recording[UUID]]) -> int | None:
        """The listeners hear of a commit (read models catch up); the position of its last."""
        for listener in self.listeners:
            listener(recordings)
        return recordings[-1].notification.id if recordings else None

    def _snapshot(self, chat: Chat) -> None:
        """Keep the chat's state every EVERY events: later loads start there. Its events
        are committed already, so a snapshot that cannot be taken is only logged."""
        if self.snapshots is None or chat.version - chat.snapshotted < snapshots.EVERY:
            return
        chat.snapshotted = chat.version
        try:
            kept = snapshots.take(chat.id, chat.version, chat.state, self._sealer.keys,
                                  self._mapper.personal)
            if kept is not None:
                self.snapshots.put(kept)
        except (InterlockError, PersistenceError) as exc:  # erased meanwhile, a store error
            snapshots.log.warning("no snapshot of %s#%d: %s", chat.id, chat.version, exc)


def replay(chat: Chat | None, events: Iterable[Any]) -> Chat | None:
    """The chat after `events` (None and a ChatStarted: a new one)."""
    for event in events:
        chat = event.mutate(chat)
    return chat
