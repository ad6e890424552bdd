"""Threads reserved before their chat begins (Agent Protocol's `POST /threads` with no agent).

A chat always has an agent: its first event, ChatStarted, names it. LangGraph's clients make a
thread first and name the agent on its first run, so a thread made with no agent is only
reserved: an id the server made, recorded for the tenant and principal that asked, in a stream
of its own (sealed and verified like a chat's). The first run that names an agent begins the
chat under that very id (`services/threads.py`); the chat's existence is the claim, and
another tenant finds neither the reservation nor the chat. The reservation holds no
personal data (no metadata): everything personal stays in the chat, under its erasure key.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from uuid import UUID, uuid5

from interlock.domain.chat.events import now
from interlock.domain.streams import Stream, StreamEvent


def reservation_id(thread_id: UUID) -> UUID:
    """The reservation's stream: derived from the thread id, so the chat may take the id."""
    return uuid5(thread_id, "interlock:thread-reserved")


class ThreadReserved(StreamEvent):
    """`actor` of `tenant` reserved `thread_id` for a chat whose agent its first run names."""

    thread_id: UUID
    tenant: str
    actor: str


class Reservation(Stream):
    """A reserved thread, replayed from its event."""

    def __init__(self, reserved: ThreadReserved) -> None:
        super().__init__(reserved.originator_version, reserved.chain)
        self.reserved = reserved

    @property
    def thread_id(self) -> UUID:
        return self.reserved.thread_id

    @property
    def tenant(self) -> str:
        return self.reserved.tenant

    @property
    def reserved_at(self) -> datetime:
        return self.reserved.timestamp

    @classmethod
    def reserve(cls, thread_id: UUID, *, tenant: str, actor: str) -> Reservation:
        """A new reservation (its event pending until saved)."""
        first = ThreadReserved(originator_id=reservation_id(thread_id), originator_version=1,
                               timestamp=now(), thread_id=thread_id, tenant=tenant, actor=actor)
        made = cls(first)
        made.pending_events.append(first)
        return made


def replay(thread_id: UUID, events: Iterable[object]) -> Reservation | None:
    """The reservation of `thread_id` these events describe; None when there is none."""
    for event in events:
        if isinstance(event, ThreadReserved) and event.thread_id == thread_id:
            return Reservation(event)
        return None
    return None
