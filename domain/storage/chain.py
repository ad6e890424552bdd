"""The event chain's formats: how a stored event is linked to the one before it.

Version 2 (every new event) hashes the exact stored bytes, so what is sealed is what
the application reads, with no canonicalisation to disagree about:

    body  = the stored JSON minus its last member `,"chain":"<chain>"`
    hash  = SHA-256("interlock-chain-v2\\n" prev_link "\\n" chat_id "\\n" version "\\n"
                    topic "\\n" body)
    seal  = HMAC-SHA256(key[kid], "interlock-seal-v2\\n" hash)
    chain = "2:" kid ":" hash ":" seal

`prev_link` is the previous event's hash (version 2), its whole chain (version 1), or
empty for a chat's first event. Version 1 (older events) is an HMAC over the previous
chain and the sorted-key JSON of the payload, with ids taken from the columns; it does
not cover the topic, so version 1 events are also checked to hold exactly the fields of
the class their topic names. docs/audit.md is the reference for both.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from functools import lru_cache
from uuid import UUID

from interlock.domain.chat.ids import id_text
from interlock.domain.storage.keys import Keyring

CHAIN_V2 = re.compile(r"2:([A-Za-z0-9_-]{1,32}):([0-9a-f]{64}):([0-9a-f]{64})")
CHAIN_V1 = re.compile(r"[0-9a-f]{64}")
TOPIC = re.compile(r"[A-Za-z0-9_.:]{1,200}")
_TAIL = b',"chain":"'


@dataclass(frozen=True)
class Record:
    """One stored event as the chain sees it: its columns and its (decoded) JSON bytes."""

    chat_id: UUID | str
    version: int
    topic: str
    state: bytes


def link_value(chain: str | None) -> str:
    """The previous-link text for the event after one whose chain is `chain`."""
    if chain is None:
        return ""
    match = CHAIN_V2.fullmatch(chain)
    return match.group(2) if match else chain


def key_of(chain: str | None) -> str | None:
    """The key id a format 2 chain names; None for format 1 (it names none) or no chain."""
    match = CHAIN_V2.fullmatch(chain) if chain else None
    return match.group(1) if match else None


def with_chain(body: bytes, chain: str) -> bytes:
    """The stored JSON: the body with `chain` appended as its last member."""
    return body[:-1] + _TAIL + chain.encode() + b'"}'


def split_v2(state: bytes) -> tuple[bytes, str] | None:
    """The body and chain of a version 2 record, or None if it is not one."""
    at = state.rfind(_TAIL)
    if at < 0 or not state.endswith(b'"}'):
        return None
    chain = state[at + len(_TAIL):-2].decode("ascii", "replace")
    if CHAIN_V2.fullmatch(chain) is None:
        return None
    return state[:at] + b"}", chain


def record_hash(prev_link: str, chat_id: UUID | str, version: int, topic: str, body: bytes) -> str:
    """The keyless hash of a version 2 record: anyone can recompute it."""
    head = f"interlock-chain-v2\n{prev_link}\n{id_text(chat_id)}\n{version}\n{topic}\n".encode()
    return hashlib.sha256(head + body).hexdigest()


def seal_hash(secret: bytes, digest: str) -> str:
    """The keyed seal over a record hash."""
    return hmac_sha256(secret).digest(b"interlock-seal-v2\n" + digest.encode()).hex()


_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


class HmacSha256:
    """HMAC-SHA256 under one key with its padded keys hashed once (RFC 2104), as Python's
    own pure-Python HMAC does: the one-shot `hmac.digest` makes OpenSSL fetch the algorithm
    and set the key up on every call, about twice the instructions of a seal this way."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > 64:  # SHA-256's block: a longer key is hashed first
            key = hashlib.sha256(key).digest()
        key = key.ljust(64, b"\0")
        self._inner = hashlib.sha256(key.translate(_IPAD))
        self._outer = hashlib.sha256(key.translate(_OPAD))

    def digest(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


@lru_cache(maxsize=64)
def hmac_sha256(key: bytes) -> HmacSha256:
    """The HMAC of a chain key (a keyring holds a handful), set up once."""
    return HmacSha256(key)


def chain_v2(keys: Keyring, prev_link: str, record: Record) -> str:
    """Seal a version 2 record with the active key."""
    digest = record_hash(prev_link, record.chat_id, record.version, record.topic, record.state)
    return f"2:{keys.active}:{digest}:{seal_hash(keys.secret(keys.active), digest)}"


class Seals:
    """A keyring's HMAC keys, each primed with the seal prefix (checks thousands per second)."""

    def __init__(self, keys: Keyring) -> None:
        self.keys = keys
        self._primed = {kid: hmac.new(keys.secret(kid), b"interlock-seal-v2\n", "sha256")
                        for kid in keys.keys}

    def problem(self, kid: str, digest: str, seal: str) -> str | None:
        """Why `seal` is not the seal of `digest` under key `kid`, or None."""
        primed = self._primed.get(kid)
        if primed is None:
            return f"sealed with unknown key {kid!r}"
        mac = primed.copy()
        mac.update(digest.encode())
        if not hmac.compare_digest(mac.hexdigest(), seal):
            return "seal does not match (wrong key or forged)"
        return None


@lru_cache(maxsize=1024)
def _good_topic(topic: str) -> bool:
    return TOPIC.fullmatch(topic) is not None


def check_stored_v2(seals: Seals | None, prev_link: str, chat_id: str, version: int, topic: str,
                    state: bytes) -> tuple[str, str | None] | None:
    """A stored record's format 2 chain and why it fails, if it does; None if not format 2.

    The same checks as split_v2 and check_v2, on the stored bytes without copying them.
    """
    at = state.rfind(_TAIL)
    if at < 0 or not state.endswith(b'"}'):
        return None
    chain = state[at + len(_TAIL):-2].decode("ascii", "replace")
    match = CHAIN_V2.fullmatch(chain)
    if match is None:
        return None
    if not _good_topic(topic):
        return chain, "malformed chain or topic"
    kid, digest, seal = match.groups()
    hashed = hashlib.sha256(
        f"interlock-chain-v2\n{prev_link}\n{chat_id}\n{version}\n{topic}\n".encode())
    hashed.update(memoryview(state)[:at])
    hashed.update(b"}")
    if hashed.hexdigest() != digest:
        return chain, "chain does not match the event"
    return chain, None if seals is None else seals.problem(kid, digest, seal)


def check_v2(keys: Keyring | None, prev_link: str, record: Record, chain: str) -> str | None:
    """Why a version 2 chain does not match its record, or None; no keys checks hashes only."""
    match = CHAIN_V2.fullmatch(chain)
    if match is None or TOPIC.fullmatch(record.topic) is None:
        return "malformed chain or topic"
    kid, digest, seal = match.groups()
    if record_hash(prev_link, record.chat_id, record.version, record.topic,
                   record.state) != digest:
        return "chain does not match the event"
    if keys is None:
        return None
    if kid not in keys:
        return f"sealed with unknown key {kid!r}"
    if not hmac.compare_digest(seal_hash(keys.secret(kid), digest), seal):
        return "seal does not match (wrong key or forged)"
    return None
