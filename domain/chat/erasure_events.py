"""The erasure of a chat's personal data, as the chat records it before its key goes."""

from __future__ import annotations

from interlock.domain.chat.events import ChatEvent
from interlock.domain.chat.state import ChatState


class ErasureBegun(ChatEvent):
    """`actor` began erasing this chat's personal data: from this version on no fork of it
    is recorded (a fork copies that data under a key of its own). Recorded before the key
    is destroyed, so a fork racing the erasure either lands before it (and is linked, so
    erased with it) or conflicts with it."""

    actor: str

    def apply(self, state: ChatState) -> None:
        state.erasing = True
