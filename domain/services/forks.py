"""Forks: a new chat from a chat's history, and the beginning of an erasure, after which
no fork of the chat is recorded."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.fork_events import ChatForkedTo
from interlock.domain.errors import ConcurrencyError, InvalidRequestError
from interlock.domain.limits import Limits
from interlock.domain.runtime.agent import Agent
from interlock.domain.services.keys import PersonalData
from interlock.domain.storage.repository import ChatRepository


class Forks:
    """Forks of chats in the shared repository; an erased chat's are refused."""

    def __init__(self, store: ChatRepository, keys: PersonalData,
                 agent: Callable[[str], Agent], limits: Callable[[], Limits]) -> None:
        """`limits`: the bounds in force (the edge may set the application's after this)."""
        self._store, self._keys, self._agent, self._limits = store, keys, agent, limits

    def fork(self, chat_id: UUID, version: int, *, actor: str, tenant: str | None = None,
             agent: str | None = None) -> Chat:
        """A new chat holding the chat's history up to `version` (its pending interrupts
        pending), linked both ways in one commit; it goes on under the chat's agent as it
        is now, or under `agent`."""
        if version < 1:
            raise InvalidRequestError(f"there is no version {version}", version=version)
        source = self._store.get(chat_id, tenant=tenant)
        self._keys.check_not_erased(source)
        self._limits().fork(chat_id)
        at = self._store.get(chat_id, version=version, tenant=tenant)
        fork = Chat.fork(at, agent=self._agent(agent or source.state.agent).name, actor=actor)
        source.record_fork(fork.id, version, actor=actor)
        self._store.commit_together([fork, source])
        return fork

    def begin_erasure(self, chat_id: UUID, *, actor: str, attempts: int = 50) -> list[UUID]:
        """Record that the chat's erasure begins, before its key is destroyed; its forks
        (their copied history is the same person's data, to erase with it). From that
        commit on no fork of it is recorded: a fork racing it loses on the version."""
        for _ in range(attempts):
            chat = self._store.get(chat_id)
            if not chat.begin_erasure(actor=actor):
                break
            try:
                self._store.commit(chat)
                break
            except ConcurrencyError:
                continue  # a fork (or a turn) got in first: its link is read below
        else:
            raise ConcurrencyError(chat_id)
        return [e.fork_id for e in self._store.events.get(chat_id)
                if isinstance(e, ChatForkedTo)]
