"""Console sessions, server side: a table beside the events, so every worker process sees a
sign-in and a sign-out at once (an in-memory table would not: `--workers` are processes).

A row holds the SHA-256 of the session id (the cookie's secret is not in the database), the
digest of the API key it signed in with (removing the key ends the session) and its expiry.
"""

from __future__ import annotations

from interlock.domain import Interlock
from interlock.stores.tables import Table, table_of


class SqlSessions:
    """Sessions in the store's table (SQLite or PostgreSQL)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        table.create("CREATE TABLE IF NOT EXISTS {t} (session TEXT PRIMARY KEY, "
                     "key_digest TEXT NOT NULL, expires BIGINT NOT NULL)")
        self._add = [table.sql("DELETE FROM {t} WHERE expires <= ?"),  # expired ones go
                     table.sql("INSERT INTO {t} (session, key_digest, expires) VALUES (?, ?, ?)")]
        self._get = table.sql("SELECT key_digest FROM {t} WHERE session = ? AND expires > ?")
        self._remove = table.sql("DELETE FROM {t} WHERE session = ?")

    def add(self, session: str, key: str, expires: int, now: int) -> None:
        self.table.run(self._add[0], (now,))
        self.table.run(self._add[1], (session, key, expires))

    def key_of(self, session: str, now: int) -> str | None:
        rows = self.table.run(self._get, (session, now))
        return str(rows[0][0]) if rows else None

    def remove(self, session: str) -> None:
        self.table.run(self._remove, (session,))


def open_sessions(app: Interlock) -> SqlSessions | None:
    """The console's session table beside the app's events (created if missing); None for
    a store that keeps no tables (memory: the console keeps them in its process)."""
    table = table_of(app, "interlock_console_sessions")
    return None if table is None else SqlSessions(table)
