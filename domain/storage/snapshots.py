"""Sealed snapshots: a long chat loads from its latest state instead of from event 1.

A snapshot is the chat's state at a version, sealed like an event and bound to the log:

    stored = body, or (personal data protected) "E1:" field ":" nonce, AES-GCM of the body
    body   = {"format":"interlock-snapshot-2","messages":N,"calls":shape} "\\n" state
             "\\n" settled refs "\\n" settled calls "\\n" live calls "\\n" messages
    hash   = SHA-256("interlock-snapshot-v1\\n" chat_id "\\n" version "\\n" tip "\\n" stored)
    seal   = "s1:" kid ":" hash ":" HMAC-SHA256(key[kid], "interlock-snapshot-seal-v1\\n" hash)

`tip` is the chain of the chat's event at `version` (also the state's `chain_tip`). A
load believes a snapshot only if its seal holds and the log's event at its version has
that chain (so `verify` checks one against the log without decrypting it); a snapshot
refused (no key, an edit, a log that moved on without it, an erased chat) leaves the load
to the log. Only each chat's latest is kept.
docs/audit.md, "Snapshots".
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.history_list import Messages
from interlock.domain.chat.state import Calls, ChatState, ToolCall
from interlock.domain.errors import InternalError
from interlock.domain.storage.erasure import FieldCipher
from interlock.domain.storage.keys import Keyring
from interlock.domain.storage.mapper import TamperedEventError

EVERY = 100  # events between snapshots: a load replays fewer than this many
FORMAT = "interlock-snapshot-2"
_FORMAT_1 = "interlock-snapshot-1"  # still read: its calls are in the state line
_SEAL = re.compile(r"s1:([A-Za-z0-9_-]{1,32}):([0-9a-f]{64}):([0-9a-f]{64})")
_ENCRYPTED = b"E1:"
_warned: set[tuple[str, int]] = set()
log = logging.getLogger("interlock.snapshots")


@dataclass(frozen=True)
class Snapshot:
    """One stored snapshot row."""

    chat_id: UUID
    version: int
    tip: str
    stored: bytes
    seal: str


class SnapshotStore(Protocol):
    """Each chat's latest snapshot, beside its events."""

    def get(self, chat_id: UUID) -> Snapshot | None: ...

    def get_many(self, chat_ids: Sequence[UUID]) -> dict[UUID, Snapshot]:
        """The snapshots these chats have (one read; a chat without one is left out)."""

    def put(self, snapshot: Snapshot) -> None:
        """Keep `snapshot` unless the chat has a later one."""

    def delete(self, chat_ids: Sequence[UUID]) -> None: ...

    def chats(self) -> list[UUID]:
        """The chats that have a snapshot."""


class SnapshotRefusedError(InternalError):
    """A stored snapshot a load must not believe; loads catch it and read the log instead."""

    def __init__(self, chat_id: UUID, version: int, problem: str) -> None:
        super().__init__(f"snapshot {chat_id}#{version} refused: {problem}",
                         chat_id=str(chat_id), version=version)


def take(chat_id: UUID, version: int, state: ChatState, keys: Keyring,
         cipher: FieldCipher | None) -> Snapshot | None:
    """The sealed snapshot of `state`, the chat's state at `version`; None when personal
    data is protected and the chat has no key (never a plaintext copy of its history)."""
    stored = _body(state)
    if cipher is not None:
        field = f"snapshot-{os.urandom(16).hex()}"  # a fresh nonce, and nothing of the body
        sealed = cipher.encrypt_raw(chat_id, version, field, stored)
        if sealed is None:
            return None
        stored = _ENCRYPTED + field.encode() + b":" + sealed
    return seal(chat_id, version, state.chain_tip or "", stored, keys)


def seal(chat_id: UUID, version: int, tip: str, stored: bytes, keys: Keyring) -> Snapshot:
    """The snapshot row of `stored` (a body, or its encryption), sealed with the active key."""
    digest = _hash(chat_id, version, tip, stored)
    return Snapshot(chat_id, version, tip, stored, f"s1:{keys.active}:{digest}:"
                    f"{_mac(keys.secret(keys.active), digest)}")


def problem(snapshot: Snapshot, keys: Keyring | None) -> str | None:
    """Why the snapshot's seal does not hold, or None; without keys, its hash only."""
    match = _SEAL.fullmatch(snapshot.seal)
    if match is None:
        return "malformed seal"
    kid, digest, mac = match.groups()
    if _hash(snapshot.chat_id, snapshot.version, snapshot.tip, snapshot.stored) != digest:
        return "seal does not match the snapshot"
    if keys is None:
        return None
    if kid not in keys:
        return f"sealed with unknown key {kid!r}"
    if not hmac.compare_digest(_mac(keys.secret(kid), digest), mac):
        return "seal does not match (wrong key or forged)"
    return None


def state_of(snapshot: Snapshot, keys: Keyring, cipher: FieldCipher | None) -> ChatState | None:
    """The state the snapshot holds, its messages left undecoded; None if this process
    cannot open it (the chat erased, no key store attached); SnapshotRefusedError if it
    must not be believed."""
    why = problem(snapshot, keys)
    if why is not None:
        raise _refused(snapshot, why)
    return _state(snapshot, cipher)


def _state(snapshot: Snapshot, cipher: FieldCipher | None) -> ChatState | None:
    body = _opened(snapshot, cipher)
    if body is None:
        return None
    head, *lines = body.split(b"\n")
    try:
        header = json.loads(head)
        if header.get("format") not in (FORMAT, _FORMAT_1):
            raise _refused(snapshot, f"unknown format {header.get('format')!r}")
        fields, *calls, messages = lines  # format 1: no calls lines, its calls in the state
        state = ChatState.model_validate_json(fields)  # pydantic-core parses: no dict first
        state.messages = Messages.from_json(messages, int(header["messages"]))
        if header["format"] == FORMAT:  # the settled calls stay JSON until one is read
            refs, held, live = calls
            state.calls = Calls.from_json(json.loads(refs), held, state.turn, live)
            if header.get("calls") != calls_shape():
                state.calls.decode()  # now: a failure refuses the snapshot
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _refused(snapshot, f"does not decode: {exc}") from None
    return state


def against_log(snapshot: Snapshot, keys: Keyring | None, logged: str | None) -> str | None:
    """Why `verify` refuses the snapshot, given the chain `logged` of the log's event at its
    version (None: no such event), or None."""
    why = problem(snapshot, keys)
    if why is None and logged != snapshot.tip:
        why = "the log's event at its version has another chain" if logged else \
            "the log has no event at its version"
    return why


def resume(kept: Snapshot, keys: Keyring, cipher: FieldCipher | None,
           events: Iterable[Any]) -> Chat | None:
    """The chat from `kept` and `events`, the log from the snapshot's version on (the first
    one must be the event the snapshot ends with); None when this process cannot open it."""
    log = iter(events)
    first = next(log, None)
    logged = first.chain if first is not None and first.originator_version == kept.version \
        else None
    why = against_log(kept, keys, logged) or _retired(kept, keys)
    if why is not None:
        raise _refused(kept, why)
    state = _state(kept, cipher)
    if state is None:
        return None
    if state.chain_tip != kept.tip:
        raise _refused(kept, "its state ends at another chain tip")
    chat = Chat(kept.chat_id, kept.version, state)
    chat.snapshotted = kept.version
    for event in log:
        chat = event.mutate(chat)
    return chat


def _retired(snapshot: Snapshot, keys: Keyring) -> str | None:
    """A load believes only a snapshot of the active key: a retired key's seal carries no
    date, so one made after the key was retired cannot be told apart (the log is read)."""
    if snapshot.seal.split(":")[1] != keys.active:
        return "sealed with a retired key"
    return None


@functools.cache
def calls_shape() -> str:
    """The shape of a ToolCall the settled calls are written in: a body of another shape
    (the model changed since) has them checked at load, where a refusal still reads the
    log. Computed once, when first needed (its schema takes milliseconds)."""
    schema = json.dumps(ToolCall.model_json_schema(), sort_keys=True)
    return hashlib.sha256(schema.encode()).hexdigest()[:16]


def warn_once(refused: SnapshotRefusedError) -> None:
    """Log a refused snapshot once per process (every load of its chat reads the log)."""
    key = (refused.details["chat_id"], refused.details["version"])
    if key not in _warned:
        _warned.add(key)
        log.warning("%s; the chat is loaded from its log", refused.message)


def _body(state: ChatState) -> bytes:
    fields = state.__pydantic_serializer__.to_json(state, exclude={"messages", "calls"})
    refs, held, live = state.calls.split_json(state.turn)
    header = (b'{"format":"' + FORMAT.encode() + b'","messages":'
              + str(len(state.messages)).encode() + b',"calls":"' + calls_shape().encode() + b'"}')
    return b"\n".join([header, fields, json.dumps(refs, separators=(",", ":")).encode(), held,
                       live, state.messages.to_json()])


def _opened(snapshot: Snapshot, cipher: FieldCipher | None) -> bytes | None:
    stored = snapshot.stored
    if not stored.startswith(_ENCRYPTED):
        return stored
    if cipher is None:
        return None  # this process cannot read personal data: its log load says so
    colon = stored.find(b":", len(_ENCRYPTED))  # none: decryption refuses it below
    field, sealed = stored[len(_ENCRYPTED):colon], memoryview(stored)[colon + 1:]  # no copy
    try:
        body = cipher.decrypt_raw(snapshot.chat_id, snapshot.version, field.decode(), sealed)
    except (TamperedEventError, ValueError) as exc:  # a bad tag, a short token
        raise _refused(snapshot, f"does not decrypt: {exc}") from None
    return body


def _refused(snapshot: Snapshot, why: str) -> SnapshotRefusedError:
    return SnapshotRefusedError(snapshot.chat_id, snapshot.version, why)


def _hash(chat_id: UUID, version: int, tip: str, stored: bytes) -> str:
    hashed = hashlib.sha256(f"interlock-snapshot-v1\n{chat_id}\n{version}\n{tip}\n".encode())
    hashed.update(stored)
    return hashed.hexdigest()


def _mac(secret: bytes, digest: str) -> str:
    return hmac.digest(secret, b"interlock-snapshot-seal-v1\n" + digest.encode(), "sha256").hex()
