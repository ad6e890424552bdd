"""Sealing keys with ids: the active key seals new events, retired keys still verify what
they sealed before they were retired and their rotation checkpoint covered, and nothing
after."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from uuid import UUID

from interlock.domain.errors import InvalidRequestError

KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


def key_id(secret: bytes) -> str:
    """The default id of a secret: a short fingerprint, so a plain secret needs no name."""
    return "k" + hashlib.sha256(b"interlock-key-id\n" + secret).hexdigest()[:12]


def retirement(text: str) -> tuple[str, datetime | None]:
    """An old secret as configured, `SECRET` or `SECRET@ISO-8601 time`: the secret and when
    it was retired (None: not said)."""
    secret, at, when = text.rpartition("@")
    if not at:
        return text, None
    try:
        retired = datetime.fromisoformat(when)
    except ValueError:
        return text, None  # an "@" of the secret itself
    if retired.tzinfo is None:
        return text, None
    return secret, retired.astimezone(UTC)


def aware(when: datetime) -> datetime:
    """A timestamp as UTC; a naive one (never written by Interlock) is read as UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Rotation:
    """What the latest rotation checkpoint signed: each chat's version then (`heads`) and
    the retired keys it covers. Past a chat's version there, only the active key seals: an
    event naming any other key (or none) is refused however it is dated."""

    seq: int  # the rotation checkpoint
    keys: frozenset[str]
    heads: Mapping[UUID | str, int] = field(repr=False)


@dataclass(frozen=True)
class Keyring:
    """HMAC keys by id; `active` names the one that seals new events, `retired` when each
    older key stopped sealing (a key missing there: retired, at a time not said)."""

    active: str
    keys: Mapping[str, bytes] = field(repr=False)
    retired: Mapping[str, datetime] = field(default_factory=dict)
    rotation: Rotation | None = None  # read from the store (interlock/audit/rotation.py)
    rotating: bool = False  # `audit rotate` verifying: retired keys not yet covered may seal

    def __post_init__(self) -> None:
        for kid in self.keys:
            if KEY_ID.fullmatch(kid) is None:
                raise InvalidRequestError(f"key id {kid!r} must match {KEY_ID.pattern}")
        if self.active not in self.keys:
            raise InvalidRequestError(f"active key {self.active!r} is not in the keyring")
        if self.active in self.retired or not set(self.retired) <= set(self.keys):
            raise InvalidRequestError("only old keys of the keyring can be retired")

    @classmethod
    def single(cls, secret: bytes) -> Keyring:
        kid = key_id(secret)
        return cls(kid, {kid: secret})

    @classmethod
    def parse(cls, active: bytes, old: str = "") -> Keyring:
        """The active secret and comma-separated older ones (`SECRET@retired-at` or just
        `SECRET`); ids are their fingerprints."""
        ring, retired = {key_id(active): active}, {}
        for text in filter(None, (t.strip() for t in old.split(","))):
            secret, when = retirement(text)
            kid = key_id(secret.encode())
            ring.setdefault(kid, secret.encode())
            if when is not None and kid != key_id(active):
                retired[kid] = when
        return cls(key_id(active), ring, retired)

    def untimed(self) -> list[str]:
        """The old keys whose retirement time is not said."""
        return [k for k in self.keys if k != self.active and k not in self.retired]

    def late(self, kid: str, sealed_at: datetime) -> str | None:
        """Why a seal by `kid` dated `sealed_at` is refused (after the key's retirement)."""
        retired = self.retired.get(kid)
        if retired is None or aware(sealed_at) <= retired:
            return None
        return f"sealed with key {kid!r} after it was retired ({retired.isoformat()})"

    def covers(self) -> bool:
        """Whether every retired key is under the rotation checkpoint (or none is retired)."""
        return not self.retired or (
            self.rotation is not None and set(self.retired) <= self.rotation.keys)

    def uncovered(self, kid: str | None, chat_id: UUID | str, version: int) -> str | None:
        """Why event `version` of a chat may not name `kid` (None: format 1, or no chain),
        or None. Once a key is retired, the rotation checkpoint fixes each chat's version:
        past it only the active key seals; a retired key no rotation covers seals nothing.
        One dict look-up, and none for the active key's events."""
        if kid == self.active or not self.retired:
            return None
        rotation, named = self.rotation, f"key {kid!r}" if kid else "no key (format 1 or none)"
        if rotation is None or (kid in self.retired and kid not in rotation.keys):
            if self.rotating:
                return None
            return (f"sealed with {named}, a retired key no rotation checkpoint covers "
                    "(run `interlock audit rotate`)") if kid in self.retired else (
                f"sealed with {named}, not the active key, and no rotation checkpoint covers "
                "the retired keys (run `interlock audit rotate`)")
        if version <= rotation.heads.get(chat_id, 0):
            return None
        return (f"sealed with {named} after rotation checkpoint {rotation.seq}: past it "
                "only the active key seals")

    def goes_back(self, before: str, kid: str) -> bool:
        """Whether a chat whose previous event `before` sealed returns to an older key `kid`:
        from the active key to any other, or to a key retired before `before` was."""
        if kid == before or kid == self.active:
            return False
        if before == self.active:
            return True
        earlier, later = self.retired.get(kid), self.retired.get(before)
        return earlier is not None and later is not None and earlier < later

    def secret(self, kid: str) -> bytes:
        return self.keys[kid]

    def __contains__(self, kid: object) -> bool:
        return kid in self.keys

    def __iter__(self) -> Iterator[bytes]:
        """The active secret first, then the others (for formats that name no key)."""
        yield self.keys[self.active]
        yield from (s for k, s in self.keys.items() if k != self.active)

    def ids(self) -> Iterator[tuple[str, bytes]]:
        """Each key id and secret, the active key first."""
        yield self.active, self.keys[self.active]
        yield from ((k, s) for k, s in self.keys.items() if k != self.active)
