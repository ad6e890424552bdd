"""Chats as this process last committed them, lent to one command at a time.

A command takes its chat out (nobody else can see it while it is changed), brings it up
to date with the events committed since (one indexed read, so other processes' writes
are seen) and gives it back only once everything it recorded is committed. A command
that fails gives nothing back, so what the cache holds is always what the store holds.
Entries expire, so that a chat erased elsewhere leaves this process's memory too.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from uuid import UUID

from interlock.domain.chat.aggregate import Chat


class ChatCache:
    """At most `size` committed chats, each kept for `ttl` seconds."""

    def __init__(
        self, size: int = 1024, ttl: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.size, self.ttl, self._clock = size, ttl, clock
        self._chats: OrderedDict[UUID, tuple[float, Chat]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, chat_id: UUID) -> Chat | None:
        """The chat, now owned by the caller; None if not kept or expired."""
        with self._lock:
            entry = self._chats.pop(chat_id, None)
        if entry is None or self._clock() - entry[0] > self.ttl:
            return None
        return entry[1]

    def give(self, chat: Chat) -> None:
        """Keep `chat`, whose every event is committed; the caller must not change it again."""
        if self.size == 0 or chat.pending_events:
            return
        with self._lock:
            self._chats[chat.id] = (self._clock(), chat)
            self._chats.move_to_end(chat.id)
            while len(self._chats) > self.size:
                self._chats.popitem(last=False)
