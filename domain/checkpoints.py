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
from typing import Any

from interlock.domain.canonical import jcs

FORMAT = "interlock-checkpoint-1"
Sign = Callable[[bytes], bytes]
CheckSignature = Callable[[bytes, bytes], bool]


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
class Checkpoint:
    """One signed checkpoint: the statement, its signature and the heads it commits to."""

    statement: dict[str, Any]
    signature: str
    heads: tuple[Head, ...]

    @property
    def seq(self) -> int:
        return int(self.statement["seq"])

    @property
    def position(self) -> int:
        return int(self.statement["position"])

    def statement_bytes(self) -> bytes:
        return jcs(self.statement).encode()

    def digest(self) -> str:
        """What the next checkpoint names as `prev`."""
        return hashlib.sha256(self.statement_bytes()).hexdigest()

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
                    retention: list[Any] | None = None) -> Checkpoint:
    """Sign the next checkpoint over `heads` (sorted by chat id)."""
    statement = {
        "format": FORMAT,
        "seq": prev.seq + 1 if prev else 1,
        "prev": prev.digest() if prev else "",
        "created_at": created_at,
        "position": position,
        "chats": len(heads),
        "events": sum(h.version for h in heads),
        "root": merkle_root([h.leaf() for h in heads]).hex(),
        "key_id": key_id,
        "retention": retention,  # [seq, digest] of the retention log's last entry, or null
    }
    return Checkpoint(statement, sign(jcs(statement).encode()).hex(), heads)


def check_sequence(checkpoints: Sequence[Checkpoint], key_id: str,
                   check: CheckSignature) -> str | None:
    """Why a run of checkpoints (oldest first) is not authentic and contiguous, or None."""
    prev: Checkpoint | None = None
    for cp in checkpoints:
        problem = _check_one(cp, prev, key_id, check)
        if problem is not None:
            return f"checkpoint {cp.statement.get('seq')}: {problem}"
        prev = cp
    return None


def _check_one(cp: Checkpoint, prev: Checkpoint | None, key_id: str,
               check: CheckSignature) -> str | None:
    s = cp.statement
    if s.get("format") != FORMAT or s.get("key_id") != key_id:
        return f"not signed by key {key_id}"
    try:
        signature = bytes.fromhex(cp.signature)
    except ValueError:
        return "malformed signature"
    if not check(cp.statement_bytes(), signature):
        return "signature does not verify (forged or edited)"
    if s.get("root") != merkle_root([h.leaf() for h in cp.heads]).hex():
        return "its list of heads does not match its signed root"
    expected = (prev.seq + 1, prev.digest()) if prev else (1, "")
    if (s.get("seq"), s.get("prev")) != expected:
        return "does not follow the previous checkpoint (one is missing or reordered)"
    return None
