"""Streams in the chats' log that are not chats (webhook subscriptions, notification channels):
their events are sealed into a chain of their own and verified like a chat's, but no chat is
ever made of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from interlock.domain.chat.events import ChatEvent
from interlock.domain.errors import ChatNotFoundError

if TYPE_CHECKING:
    from interlock.domain.chat.aggregate import Chat

Signer = Callable[[str | None, ChatEvent], str]


class StreamStore(Protocol):
    """What a desk of a tenant's stream (delegations, data policies) needs of the
    application service (domain/application.py): its events, its sealer, and a save."""

    events: Any
    sealer: Any

    def save_stream(self, stream_id: UUID, events: list[ChatEvent]) -> int: ...


class StreamEvent(ChatEvent):
    """An event of a stream that is no chat: asked for as a chat, it is not found."""

    def mutate(self, chat: Chat | None) -> Chat:
        raise ChatNotFoundError(self.originator_id)


def seal(pending: Sequence[ChatEvent], tip: str | None,
         sign: Signer) -> tuple[list[ChatEvent], str | None]:
    """`pending` chained after `tip`, and the new tip."""
    sealed = []
    for event in pending:
        tip = sign(tip, event)
        sealed.append(event.model_copy(update={"chain": tip}))
    return sealed, tip


class Stream:
    """What a stream that is no chat keeps while it is used: its version, the tip of its
    chain, and the events recorded since it was read (until `seal` takes them)."""

    def __init__(self, version: int = 0, chain_tip: str | None = None) -> None:
        self.version, self.chain_tip = version, chain_tip
        self.pending_events: list[ChatEvent] = []

    def _followed(self, event: ChatEvent) -> None:
        """The stream has `event` now (replayed or recorded)."""
        self.version = event.originator_version
        self.chain_tip = event.chain or self.chain_tip

    def seal(self, sign: Signer) -> list[ChatEvent]:
        """The pending events chained to the stream, taken out of it."""
        sealed, self.chain_tip = seal(self.pending_events, self.chain_tip, sign)
        self.pending_events = []
        return sealed
