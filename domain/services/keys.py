"""Personal data under erasable per-chat keys: attached once, asked whether a chat's is gone."""

from __future__ import annotations

from uuid import UUID

from interlock.domain.chat.aggregate import Chat
from interlock.domain.errors import ChatErasedError
from interlock.domain.storage.erasure import FieldCipher
from interlock.domain.storage.mapper import PydanticMapper, Sealer


class PersonalData:
    """Which key store (if any) the mapper encrypts personal fields with, and what it says."""

    def __init__(self, mapper: PydanticMapper, sealer: Sealer) -> None:
        self._mapper, self._sealer = mapper, sealer

    def protect(self, cipher: FieldCipher) -> None:
        """Store personal fields encrypted under erasable per-chat keys, and read them back."""
        self._mapper.personal = cipher
        self._sealer.body = self._mapper.event_body

    @property
    def cipher(self) -> FieldCipher | None:
        """The key store attached; None while personal data is kept in plaintext."""
        return self._mapper.personal

    def erased(self, chat_id: UUID) -> bool:
        """Whether the chat's key was destroyed, as the store says now (a chat kept in
        plaintext never is)."""
        cipher = self._mapper.personal
        return cipher is not None and cipher.erased_at(chat_id) is not None

    def check_not_erased(self, chat: Chat) -> None:
        """A chat whose erasure began, or whose key the store says is gone (an erasure
        recorded before chats recorded its beginning), is not forked."""
        if chat.state.erasing or self.erased(chat.id):
            raise ChatErasedError(chat.id)
