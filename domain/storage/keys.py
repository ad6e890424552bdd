"""Sealing keys with ids: the active key seals new events, older keys still verify."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from interlock.domain.errors import InvalidRequestError

KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


def key_id(secret: bytes) -> str:
    """The default id of a secret: a short fingerprint, so a plain secret needs no name."""
    return "k" + hashlib.sha256(b"interlock-key-id\n" + secret).hexdigest()[:12]


@dataclass(frozen=True)
class Keyring:
    """HMAC keys by id; `active` names the one that seals new events."""

    active: str
    keys: Mapping[str, bytes] = field(repr=False)

    def __post_init__(self) -> None:
        for kid in self.keys:
            if KEY_ID.fullmatch(kid) is None:
                raise InvalidRequestError(f"key id {kid!r} must match {KEY_ID.pattern}")
        if self.active not in self.keys:
            raise InvalidRequestError(f"active key {self.active!r} is not in the keyring")

    @classmethod
    def single(cls, secret: bytes) -> Keyring:
        kid = key_id(secret)
        return cls(kid, {kid: secret})

    @classmethod
    def parse(cls, active: bytes, old: str = "") -> Keyring:
        """The active secret and comma-separated older ones; ids are their fingerprints."""
        ring = {key_id(active): active}
        for text in filter(None, (t.strip() for t in old.split(","))):
            ring.setdefault(key_id(text.encode()), text.encode())
        return cls(key_id(active), ring)

    def secret(self, kid: str) -> bytes:
        return self.keys[kid]

    def __contains__(self, kid: object) -> bool:
        return kid in self.keys

    def __iter__(self) -> Iterator[bytes]:
        """The active secret first, then the others (for formats that name no key)."""
        yield self.keys[self.active]
        yield from (s for k, s in self.keys.items() if k != self.active)

