"""Thread ids reserved before their chat (domain/threads.py): the chat begins under the
reserved id when its first run names the agent."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID, uuid4

from interlock.domain.chat.aggregate import Chat
from interlock.domain.errors import ChatNotFoundError, ConcurrencyError
from interlock.domain.services.commands import StartChat
from interlock.domain.storage.mapper import Sealer
from interlock.domain.storage.repository import ChatRepository
from interlock.domain.threads import Reservation, replay, reservation_id


class Threads:
    """Reserve a thread id, read a reservation, begin a reserved thread's chat."""

    def __init__(self, store: ChatRepository, sealer: Sealer,
                 start: Callable[[StartChat], Chat]) -> None:
        self._store, self._sealer, self._start = store, sealer, start

    def reserve(self, *, actor: str, tenant: str) -> Reservation:
        """A thread id for a chat whose agent its first run names."""
        reservation = Reservation.reserve(uuid4(), tenant=tenant, actor=actor)
        self._store.append(reservation_id(reservation.thread_id),
                           reservation.seal(self._sealer.sign))
        return reservation

    def get(self, thread_id: UUID, *, tenant: str) -> Reservation | None:
        """The tenant's reservation of `thread_id`; None if there is none (or another's)."""
        found = replay(thread_id, self._store.events.get(reservation_id(thread_id)))
        return found if found is not None and found.tenant == tenant else None

    def start_chat(self, thread_id: UUID, agent: str, *, actor: str, tenant: str) -> Chat:
        """Begin the chat of a reserved thread with `agent` (its first run names it); the chat
        another run began first, if one did. ChatNotFoundError if the tenant reserved no
        such thread."""
        if self.get(thread_id, tenant=tenant) is None:
            raise ChatNotFoundError(thread_id)
        try:
            return self._start(StartChat(agent=agent, actor=actor, tenant=tenant,
                                         chat_id=thread_id))
        except ConcurrencyError:  # a racing first run began it: one chat, one agent
            return self._store.get(thread_id, tenant=tenant)
