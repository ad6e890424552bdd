"""Signed checkpoints: a Merkle root over every chat's head, signed with Ed25519.

A checkpoint lists each chat's (id, last version, link) and signs a statement holding
their Merkle root (RFC 6962 hashing) and the hash of the previous checkpoint. A chat or
a chat's tail deleted after a checkpoint is then detected by anyone holding the public
key. Signing happens outside the domain (interlock/audit/signing.py): this module only
builds and checks the bytes. docs/audit.md is the reference for the formats.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from interlock.domain.chat.canonical import jcs

FORMAT = "interlock-checkpoint-1"
Sign = Callable[[bytes], bytes]
CheckSignature = Callable[[bytes, bytes], bool]
S = TypeVar("S", bound="Signed")


@dataclass(frozen=True)
class Head:
    """A chat's last sealed version and its link (the hash, or a format 1 seal)."""

    chat_id: str
    version: int
    link: str

    def leaf(self) -> bytes:
        return hashlib.sha256(b"\x00" + f"{self.chat_id}\n{self.version}\n{self.link}".encode(
        )).digest()


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """RFC 6962 Merkle tree hash over leaf hashes (the empty tree hashes the empty string)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    split = 1 << ((len(leaves) - 1).bit_length() - 1)  # largest power of two below n
    return hashlib.sha256(b"\x01" + merkle_root(leaves[:split])
                          + merkle_root(leaves[split:])).digest()


@dataclass(frozen=True)
class Signed:
    """A signed statement of a chained log (checkpoints, retention entries).

    Each statement names its format, its key, its sequence number `seq` and the digest
    of the statement before it (`prev`), and is signed over its JCS form.
    """

    statement: dict[str, Any]
    signature: str

    @property
    def seq(self) -> int:
        return int(self.statement["seq"])

    def statement_bytes(self) -> bytes:
        return jcs(self.statement).encode()

    def digest(self) -> str:
        """What the next statement names as `prev`."""
        return hashlib.sha256(self.statement_bytes()).hexdigest()


def chained(prev: Signed | None) -> dict[str, Any]:
    """The `seq` and `prev` of the statement after `prev` (the first if None)."""
    return {"seq": prev.seq + 1, "prev": prev.digest()} if prev else {"seq": 1, "prev": ""}


def check_chained(log: Sequence[S], *, fmt: str, noun: str, key_id: str,
                  check: CheckSignature, sound: Callable[[S], str | None]) -> str | None:
    """Why a signed log (oldest first) is not authentic, contiguous and `sound`, or None."""
    prev: S | None = None
    for item in log:
        problem = _check_signed(item, prev, fmt, noun, key_id, check) or sound(item)
        if problem is not None:
            return f"{noun} {item.statement.get('seq')}: {problem}"
        prev = item
    return None


def _check_signed(item: Signed, prev: Signed | None, fmt: str, noun: str, key_id: str,
                  check: CheckSignature) -> str | None:
    s = item.statement
    if s.get("format") != fmt or s.get("key_id") != key_id:
        return f"not signed by key {key_id}"
    try:
        signature = bytes.fromhex(item.signature)
    except ValueError:
        return "malformed signature"
    if not check(item.statement_bytes(), signature):
        return "signature does not verify (forged or edited)"
    if (s.get("seq"), s.get("prev")) != tuple(chained(prev).values()):
        noun = noun.split()[-1]  # "retention entry" -> "entry"
        return f"does not follow the previous {noun} (one is missing or reordered)"
    return None


@dataclass(frozen=True)
class Checkpoint(Signed):
    """One signed checkpoint: the statement, its signature and the heads it commits to."""

    heads: tuple[Head, ...]

    @property
    def position(self) -> int:
        return int(self.statement["position"])

    def to_json(self) -> bytes:
        heads = [[h.chat_id, h.version, h.link] for h in self.heads]
        return jcs({"statement": self.statement, "signature": self.signature,
                    "heads": heads}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Checkpoint:
        obj = json.loads(data)
        heads = tuple(Head(str(c), int(v), str(link)) for c, v, link in obj["heads"])
        return cls(dict(obj["statement"]), str(obj["signature"]), heads)


def sorted_heads(heads: dict[str, tuple[int, str]]) -> tuple[Head, ...]:
    return tuple(Head(c, v, link) for c, (v, link) in sorted(heads.items()))


def make_checkpoint(heads: tuple[Head, ...], *, prev: Checkpoint | None, position: int,
                    created_at: str, key_id: str, sign: Sign,
                    retention: list[Any] | None = None,
                    keys: dict[str, Any] | None = None) -> Checkpoint:
    """Sign the next checkpoint over `heads` (sorted by chat id); `keys`: the sealing keys
    it was verified with (`sealing`), when it names them."""
    statement = {
        "format": FORMAT,
        **chained(prev),
        "created_at": created_at,
        "position": position,
        "chats": len(heads),
        "events": sum(h.version for h in heads),
        "root": merkle_root([h.leaf() for h in heads]).hex(),
        "key_id": key_id,
        "retention": retention,  # [seq, digest] of the retention log's last entry, or null
        **({"keys": keys} if keys is not None else {}),
    }
    return Checkpoint(statement, sign(jcs(statement).encode()).hex(), heads)


def sealing(active: str, retired: dict[str, str], rotation: int | None) -> dict[str, Any]:
    """A statement's `keys`: the active HMAC key, when each retired one was retired, and the
    checkpoint of the rotation that covers them (past a chat's head there, only the active
    key seals)."""
    return {"active": active, "retired": retired, "rotation": rotation}


def check_sequence(checkpoints: Sequence[Checkpoint], key_id: str,
                   check: CheckSignature) -> str | None:
    """Why a run of checkpoints (oldest first) is not authentic and contiguous, or None."""
    return check_chained(checkpoints, fmt=FORMAT, noun="checkpoint", key_id=key_id,
                         check=check, sound=_root_matches)


def _root_matches(cp: Checkpoint) -> str | None:
    if cp.statement.get("root") != merkle_root([h.leaf() for h in cp.heads]).hex():
        return "its list of heads does not match its signed root"
    return None
