"""Small helpers the provider tests share: stream collectors and event views."""

from __future__ import annotations

from typing import Any, TypeVar
from uuid import UUID

from interlock.domain import Interlock, StreamEvent
from interlock.domain.chat.events import ChatEvent

E = TypeVar("E", bound=ChatEvent)


class Collected:
    """Collects a turn's stream events (the `emit` callback)."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    async def __call__(self, event: StreamEvent) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e.data for e in self.events if e.type == kind]

    def text(self) -> str:
        return "".join(d["text"] for d in self.of("text"))


def event_types(app: Interlock, chat_id: UUID) -> list[str]:
    return [type(e).__name__ for e in app.chat_events(chat_id)]


def events_of(app: Interlock, chat_id: UUID, kind: type[E]) -> list[E]:
    return [e for e in app.chat_events(chat_id) if isinstance(e, kind)]
