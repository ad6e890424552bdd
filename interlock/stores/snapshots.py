"""Where sealed snapshots are kept: one row per chat, beside its events (memory, SQLite,
PostgreSQL). What a row holds and when a load believes it: interlock/domain/snapshots.py."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError

from interlock.domain import Interlock
from interlock.domain.storage.snapshots import Snapshot, SnapshotStore
from interlock.stores.tables import Table, table_of


class MemorySnapshots:
    def __init__(self) -> None:
        self._rows: dict[UUID, Snapshot] = {}
        self._lock = threading.Lock()

    def get(self, chat_id: UUID) -> Snapshot | None:
        return self._rows.get(chat_id)

    def get_many(self, chat_ids: Sequence[UUID]) -> dict[UUID, Snapshot]:
        return {c: kept for c in chat_ids if (kept := self._rows.get(c)) is not None}

    def put(self, snapshot: Snapshot) -> None:
        with self._lock:
            kept = self._rows.get(snapshot.chat_id)
            if kept is None or kept.version < snapshot.version:
                self._rows[snapshot.chat_id] = snapshot

    def delete(self, chat_ids: Sequence[UUID]) -> None:
        with self._lock:
            for chat_id in chat_ids:
                self._rows.pop(chat_id, None)

    def chats(self) -> list[UUID]:
        return list(self._rows)


class SqlSnapshots:
    """The same statements on SQLite and PostgreSQL, each atomic on its own."""

    def __init__(self, table: Table) -> None:
        self.run, self.table = table.run, table
        self.sql = {name: table.sql(text) for name, text in _STATEMENTS.items()}
        table.create(_CREATE)
        try:
            table.keep_outside("stored")
        except STORE_ERRORS as exc:  # only reads are slower: try again at the next start
            log.warning("snapshot bodies are not stored EXTERNAL yet: %s", exc)

    def get(self, chat_id: UUID) -> Snapshot | None:
        return self.get_many([chat_id]).get(chat_id)

    def get_many(self, chat_ids: Sequence[UUID]) -> dict[UUID, Snapshot]:
        """The snapshots found; a table that cannot be read, or a row that is not a
        snapshot, is logged and left out: loads then read the log."""
        try:
            rows = self.table.run_in(_GET_MANY, [str(c) for c in chat_ids])
        except STORE_ERRORS as exc:
            log.warning("snapshots not read (chats load from their logs): %s", exc)
            return {}
        found = (_snapshot_of(row) for row in rows)
        return {kept.chat_id: kept for kept in found if kept is not None}

    def put(self, snapshot: Snapshot) -> None:
        """Keep it; a store that fails to only costs later loads time (the events are
        committed), so the failure is logged and the command goes on."""
        try:
            self.run(self.sql["put"], (str(snapshot.chat_id), snapshot.version, snapshot.tip,
                                       snapshot.stored, snapshot.seal))
        except STORE_ERRORS as exc:
            log.warning("snapshot %s#%d not kept: %s", snapshot.chat_id, snapshot.version, exc)

    def delete(self, chat_ids: Sequence[UUID]) -> None:
        self.table.run_in(_DELETE_MANY, [str(c) for c in chat_ids])

    def chats(self) -> list[UUID]:
        ids = [_uuid(chat_id) for (chat_id,) in self.run(self.sql["chats"], ())]
        return [chat_id for chat_id in ids if chat_id is not None]


def _snapshot_of(row: tuple[object, ...]) -> Snapshot | None:
    chat_id, version, tip, stored, seal = row
    found = _uuid(chat_id)
    if (found is None or not isinstance(version, int) or not isinstance(stored, bytes | memoryview)
            or not isinstance(tip, str) or not isinstance(seal, str)):
        log.warning("a row of the snapshot table is not a snapshot (chat %r): left out", chat_id)
        return None
    return Snapshot(found, version, tip, bytes(stored), seal)


def _uuid(text: object) -> UUID | None:
    try:
        return UUID(str(text))
    except ValueError:
        return None


log = logging.getLogger("interlock.snapshots")
STORE_ERRORS = (PersistenceError, psycopg.Error, sqlite3.Error)
_CREATE = ("CREATE TABLE IF NOT EXISTS {t} (chat_id TEXT PRIMARY KEY, version BIGINT NOT NULL, "
           "tip TEXT NOT NULL, stored {blob} NOT NULL, seal TEXT NOT NULL)")
_GET_MANY = "SELECT chat_id, version, tip, stored, seal FROM {t} WHERE chat_id IN (?)"
_DELETE_MANY = "DELETE FROM {t} WHERE chat_id IN (?)"
_STATEMENTS = {
    # only a later snapshot replaces the one kept (two processes may take them at once)
    "put": "INSERT INTO {t} AS kept (chat_id, version, tip, stored, seal) VALUES (?, ?, ?, ?, ?) "
           "ON CONFLICT (chat_id) DO UPDATE SET version = excluded.version, tip = excluded.tip, "
           "stored = excluded.stored, seal = excluded.seal WHERE kept.version < excluded.version",
    "chats": "SELECT chat_id FROM {t} ORDER BY chat_id",
}


def open_snapshots(app: Interlock) -> SnapshotStore:
    """The snapshot table beside the app's events (created if missing)."""
    table = table_of(app, "interlock_sealed_snapshots")
    return MemorySnapshots() if table is None else SqlSnapshots(table)
