"""Erasable personal data: which event fields hold it, and how they are sealed away.

With a `FieldCipher` attached (Interlock.protect_personal_data), the fields below are
stored encrypted under a key per chat, and the event's JSON gains a top-level
`"$personal": 1` marker; each such field becomes `{"$erasable": token}`. Erasing a chat
destroys its key: its events stay (so the chain and checkpoints still verify, they
cover the ciphertext) and decode with the placeholders below. docs/audit.md, "Erasure".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

from interlock.domain.errors import InternalError

MARKER, FIELD = "$personal", "$erasable"
ERASED = "[erased]"
_ERASED_MESSAGE = {"role": "model", "content": [{"text": ERASED}]}

# Each event topic's fields that hold personal data, and what reads back once erased.
PERSONAL: dict[str, dict[str, Any]] = {
    "interlock:ChatStarted": {"metadata": {}},
    "interlock:UserMessageSent": {"text": ERASED},
    "interlock:ModelResponded": {"message": _ERASED_MESSAGE},
    "interlock:ToolRequested": {"input": None},
    "interlock:ToolCompleted": {"output": None},
    "interlock:ToolFailed": {"error": ERASED},
    "interlock:Interrupted": {"metadata": None},
    "interlock:Responded": {"output": None, "metadata": None, "resume_metadata": None},
    "interlock:Restarted": {"resumed_metadata": None, "original_input": None,
                            "replace_input": None, "resume_metadata": None},
    "interlock:TurnFinished": {"error": None},
    "interlock:ApprovalVoted": {"edited_input": None, "reason": None, "resume_metadata": None},
    "interlock:InterruptWithdrawn": {"reason": ERASED},
}


class FieldCipher(Protocol):
    """Encrypts a chat's personal fields under that chat's key; None once erased."""

    def encrypt(self, chat_id: UUID, version: int, field: str, plaintext: bytes) -> str | None:
        """The field's token, or None when the chat is kept in plaintext (begun unprotected)."""

    def decrypt(self, chat_id: UUID, version: int, field: str, token: str) -> bytes | None: ...

    def encrypt_raw(self, chat_id: UUID, version: int, field: str,
                    plaintext: bytes) -> bytes | None:
        """`encrypt` as bytes, not text: for a large value (a snapshot)."""

    def decrypt_raw(self, chat_id: UUID, version: int, field: str,
                    raw: bytes | memoryview) -> bytes | None: ...

    def warm(self, chat_ids: Sequence[UUID]) -> None:
        """Get ready to decrypt these chats (their keys read together); a hint."""

    def readable(self, chat_id: UUID) -> bool:
        """Whether the chat's key is there now: its fields decrypt (False once erased)."""

    def erased_at(self, chat_id: UUID) -> str | None:
        """When the chat's key was destroyed, as the store says now (never a cached answer)."""


class PersonalDataLockedError(InternalError):
    """The store holds encrypted personal data, and no key store was attached to read it."""



def sealed_body(event: Any, cipher: FieldCipher) -> bytes | None:
    """The event's JSON without its chain, its personal fields encrypted; None for a chat
    kept in plaintext (begun before protection), and for an event of a chat whose key is
    there with nothing to seal.

    Each field's plaintext is that field's JSON, as pydantic serialises it in the event;
    the other members are serialised once, and the sealed fields follow them. A field that
    is null and reads back null once erased holds nothing: it stays as it is, in the clear
    (a turn's `error`, a decision's `metadata`: most events of a cycle have some).
    """
    fields = [name for name, erased in PERSONAL[event.TOPIC].items()
              if erased is not None or getattr(event, name) is not None]
    chat_id, version = event.originator_id, event.originator_version
    if not fields and version > 1 and cipher.readable(chat_id):
        return None  # (version 1 makes the chat's key; an erased chat's is gone: refused below)
    fields = fields or list(PERSONAL[event.TOPIC])
    serializer = event.__pydantic_serializer__
    sealed = []
    for name in fields:
        member = serializer.to_json(event, include={name})  # b'{"name":<value>}'
        token = cipher.encrypt(chat_id, version, name, member[len(name) + 4:-1])
        if token is None:
            return None  # the chat began before protection: it stays as it was
        sealed.append(b'"%s":{"%s":"%s"}' % (name.encode(), FIELD.encode(), token.encode()))
    if type(event).class_version > 1:
        sealed.append(b'"class_version":%d' % type(event).class_version)
    rest = serializer.to_json(event, exclude={"chain", *fields})
    return b"%s,%s,\"%s\":1}" % (rest[:-1], b",".join(sealed), MARKER.encode())


def open_fields(data: dict[str, Any], topic: str, cipher: FieldCipher | None) -> None:
    """Decrypt `data`'s personal fields in place, or put placeholders where erased."""
    data.pop(MARKER, None)
    if cipher is None:
        raise PersonalDataLockedError(
            "events hold encrypted personal data: attach the store's key store to read them")
    chat_id, version = UUID(str(data["originator_id"])), int(data["originator_version"])
    for name, placeholder in PERSONAL.get(topic, {}).items():
        value = data.get(name)
        if isinstance(value, dict) and set(value) == {FIELD}:
            plaintext = cipher.decrypt(chat_id, version, name, str(value[FIELD]))
            data[name] = placeholder if plaintext is None else json.loads(plaintext)
