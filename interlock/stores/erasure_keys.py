"""Per-chat keys for personal data (AES-256-GCM), kept in a table of their own.

Erasing a chat sets its key to NULL: its events stay, their personal fields can no
longer be read by anyone. Keys are cached for `TTL` seconds, so another process stops
reading an erased chat within that time (so views are rebuilt only after it: a running
server's view runner would otherwise write back what it can still decrypt). A chat
gets its key with its first event: a chat begun before protection was attached has
none, and stays in plaintext (it cannot be erased by key, and `erase` says so).
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.postgres import PostgresApplicationRecorder

from interlock.domain import Interlock
from interlock.domain.chat.ids import id_text
from interlock.domain.errors import InvalidRequestError
from interlock.domain.storage.chain import HmacSha256
from interlock.domain.storage.mapper import TamperedEventError
from interlock.stores.postgres import InterlockPostgresRecorder
from interlock.stores.tables import Table, table_of

TTL = 5.0  # seconds: a DB read per active chat per TTL, the delay of an erasure
CACHED = 4096  # chats whose key row is kept in memory (least recently used go first)
Row = tuple[bytes | None, str | None]  # key, erased_at


class KeyStore:
    """Implements `FieldCipher` with one random AES-256 key per chat."""

    def __init__(self, backend: _Backend) -> None:
        self.backend = backend
        self._cache: OrderedDict[UUID, tuple[float, Row]] = OrderedDict()
        self._lock = threading.Lock()  # turns encrypt and decrypt from several I/O threads
        self._ciphers: dict[bytes, tuple[AESGCM, HmacSha256]] = {}

    @classmethod
    def open(cls, app: Interlock) -> KeyStore:
        """The key store beside the app's events (its table is created if missing)."""
        store = cls(_backend(app))
        if isinstance(store.backend, _WithFirstEvents):
            store.backend.new_keys.refused.append(store._forget)
        return store

    def encrypt(self, chat_id: UUID, version: int, field: str, plaintext: bytes) -> str | None:
        """The field's token; None for a chat begun in plaintext (before protection)."""
        sealed = self.encrypt_raw(chat_id, version, field, plaintext)
        return None if sealed is None else base64.urlsafe_b64encode(sealed).decode()

    def decrypt(self, chat_id: UUID, version: int, field: str, token: str) -> bytes | None:
        key, _ = self._row(chat_id)
        if key is None:  # erased: the token is not even read
            return None
        return self._open(key, chat_id, version, field, base64.urlsafe_b64decode(token))

    def encrypt_raw(self, chat_id: UUID, version: int, field: str,
                    plaintext: bytes) -> bytes | None:
        """`encrypt`'s token before base64: nonce, then ciphertext and tag."""
        key, erased_at = self._row(chat_id, create=version == 1)
        if erased_at is not None:
            raise InvalidRequestError(f"chat {chat_id} was erased: nothing more can be written",
                                      chat_id=str(chat_id))
        if key is None:
            return None
        place = _place(chat_id, version, field)
        aead, mac = self._aead(key)
        nonce = mac.digest(place)[:12]  # HMAC-SHA256: one per (chat, version, field)
        return nonce + aead.encrypt(nonce, plaintext, place)

    def decrypt_raw(self, chat_id: UUID, version: int, field: str,
                    raw: bytes | memoryview) -> bytes | None:
        key, _ = self._row(chat_id)
        return None if key is None else self._open(key, chat_id, version, field, raw)

    def _open(self, key: bytes, chat_id: UUID, version: int, field: str,
              raw: bytes | memoryview) -> bytes:
        try:
            return self._aead(key)[0].decrypt(raw[:12], raw[12:], _place(chat_id, version, field))
        except InvalidTag:
            raise TamperedEventError(chat_id, version, f"{field} was not encrypted here") from None

    def erase(self, chat_id: UUID) -> str:
        """Destroy the chat's key; when. A chat never protected cannot be erased by key."""
        key, erased_at = self.check_erasable(chat_id)
        if erased_at is not None:
            return erased_at
        assert key is not None
        when = datetime.now(UTC).isoformat()
        self.backend.erase(chat_id, when)
        self._ciphers.pop(key, None)
        self._keep(chat_id, (None, when))
        return when

    def check_erasable(self, chat_id: UUID) -> Row:
        """The chat's key row as the store holds it now; InvalidRequestError for a chat with
        no key that was never erased (stored in plaintext, or no such chat): erase asks this
        before it records anything of the erasure."""
        key, erased_at = row = self._row(chat_id, fresh=True)
        if key is None and erased_at is None:
            raise InvalidRequestError(
                f"chat {chat_id} has no personal-data key: it was stored in plaintext (or does"
                " not exist), so it cannot be erased by destroying a key", chat_id=str(chat_id))
        return row

    def warm(self, chat_ids: Sequence[UUID]) -> None:
        """Read the keys of these chats that are not cached in one query (a page of chats
        about to be loaded together), instead of one query each on first decryption."""
        now = time.monotonic()
        with self._lock:
            missing = [c for c in chat_ids
                       if (cached := self._cache.get(c)) is None or now - cached[0] >= TTL]
        if missing:
            found = self.backend.get_many(missing)
            for chat_id in missing:
                self._keep(chat_id, found.get(chat_id) or (None, None), read_at=now)

    def readable(self, chat_id: UUID) -> bool:
        return self._row(chat_id)[0] is not None

    def erased_at(self, chat_id: UUID) -> str | None:
        return self._row(chat_id, fresh=True)[1]

    def _row(self, chat_id: UUID, *, create: bool = False, fresh: bool = False) -> Row:
        with self._lock:
            cached = self._cache.get(chat_id)
        read_at = time.monotonic()
        if cached is not None and not fresh and read_at - cached[0] < TTL:
            return cached[1]
        row = self.backend.add(chat_id, os.urandom(32)) if create else self.backend.get(chat_id)
        return self._keep(chat_id, row or (None, None), read_at=read_at)

    def _forget(self, chat_id: UUID | str) -> None:
        """Drop the cached row: the key given to the chat was not written (its group was
        refused), so the next use reads what the store holds."""
        with self._lock:
            self._cache.pop(chat_id if isinstance(chat_id, UUID) else UUID(chat_id), None)

    def _aead(self, key: bytes) -> tuple[AESGCM, HmacSha256]:
        """The chat's cipher, and the HMAC its nonces derive from, each set up once."""
        aead = self._ciphers.get(key)
        if aead is None:
            if len(self._ciphers) > CACHED:
                self._ciphers.clear()
            aead = self._ciphers[key] = (AESGCM(key), HmacSha256(key))
        return aead

    def _keep(self, chat_id: UUID, row: Row, *, read_at: float | None = None) -> Row:
        """Cache `row`, read from the store at `read_at` (now if None), unless an entry
        cached after that read (a new key, an erasure) is there; the row cached."""
        at = time.monotonic() if read_at is None else read_at
        with self._lock:
            cached = self._cache.get(chat_id)
            if cached is not None and cached[0] > at:
                return cached[1]
            self._cache[chat_id] = (at, row)
            self._cache.move_to_end(chat_id)
            while len(self._cache) > CACHED:
                self._cache.popitem(last=False)
            return row


def _place(chat_id: UUID, version: int, field: str) -> bytes:
    return f"interlock-personal-v1\n{id_text(chat_id)}\n{version}\n{field}".encode()


class _Backend:
    """Rows of (chat_id, key, erased_at) in the store's database."""

    def get(self, chat_id: UUID) -> Row | None:
        raise NotImplementedError

    def add(self, chat_id: UUID, key: bytes) -> Row:
        """Give the chat `key` unless it has a row already; the row it has now."""
        raise NotImplementedError

    def get_many(self, chat_ids: Sequence[UUID]) -> dict[UUID, Row]:
        """The rows these chats have (a chat without one is left out)."""
        return {c: row for c in chat_ids if (row := self.get(c)) is not None}

    def erase(self, chat_id: UUID, when: str) -> None:
        raise NotImplementedError


class _Memory(_Backend):
    def __init__(self) -> None:
        self.rows: dict[UUID, Row] = {}

    def get(self, chat_id: UUID) -> Row | None:
        return self.rows.get(chat_id)

    def add(self, chat_id: UUID, key: bytes) -> Row:
        return self.rows.setdefault(chat_id, (key, None))

    def erase(self, chat_id: UUID, when: str) -> None:
        self.rows[chat_id] = (None, when)


class _Sql(_Backend):
    """The same three statements on SQLite and PostgreSQL."""

    def __init__(self, table: Table, statements: dict[str, str],
                 key_of: Callable[[UUID], Any]) -> None:
        self.run, self.key_of, self.table = table.run, key_of, table
        self.sql = {name: table.sql(text) for name, text in statements.items()
                    if name != "create"}
        table.create(statements["create"])

    def get(self, chat_id: UUID) -> Row | None:
        return _first(self.run(self.sql["get"], (self.key_of(chat_id),)))

    def add(self, chat_id: UUID, key: bytes) -> Row:
        # One round trip: the conflict clause touches nothing and returns the existing row.
        row = _first(self.run(self.sql["add"], (self.key_of(chat_id), key)))
        assert row is not None, "INSERT ... RETURNING returns the row"
        return row

    def erase(self, chat_id: UUID, when: str) -> None:
        self.run(self.sql["erase"], (when, self.key_of(chat_id)))

    def get_many(self, chat_ids: Sequence[UUID]) -> dict[UUID, Row]:
        by_key = {self.key_of(c): c for c in chat_ids}
        rows = self.table.run_in(_GET_MANY, list(by_key), self.run)
        return {by_key[chat_key]: (bytes(key) if key is not None else None, erased_at)
                for chat_key, key, erased_at in rows}


class _WithFirstEvents(_Sql):
    """PostgreSQL: a new chat's key is written by the append of its first events, in their
    transaction (`NewKeys`), instead of a statement of its own before them."""

    def __init__(self, table: Table, statements: dict[str, str],
                 key_of: Callable[[UUID], Any], recorder: InterlockPostgresRecorder) -> None:
        super().__init__(table, statements, key_of)
        self.new_keys = recorder.write_keys_in(table.name)

    def add(self, chat_id: UUID, key: bytes) -> Row:
        return self.new_keys.put(chat_id, key), None


def _first(rows: list[Any]) -> Row | None:
    if not rows:
        return None
    key, erased_at = rows[0]
    return (bytes(key) if key is not None else None, erased_at)


_STATEMENTS = {
    "create": "CREATE TABLE IF NOT EXISTS {t} (chat_id TEXT PRIMARY KEY, key {blob}, "
              "erased_at TEXT)",
    "get": "SELECT key, erased_at FROM {t} WHERE chat_id = ?",
    "add": "INSERT INTO {t} (chat_id, key) VALUES (?, ?) ON CONFLICT (chat_id) DO UPDATE "
           "SET chat_id = excluded.chat_id RETURNING key, erased_at",
    "erase": "UPDATE {t} SET key = NULL, erased_at = ? WHERE chat_id = ?",
}
_GET_MANY = "SELECT chat_id, key, erased_at FROM {t} WHERE chat_id IN (?)"


def _backend(app: Interlock) -> _Backend:
    table = table_of(app, "interlock_erasure_keys" if isinstance(
        app.recorder, PostgresApplicationRecorder) else "erasure_keys")
    if table is None:
        return _Memory()
    if isinstance(app.recorder, InterlockPostgresRecorder):
        return _WithFirstEvents(table, _STATEMENTS, str, app.recorder)
    return _Sql(table, _STATEMENTS, str)
