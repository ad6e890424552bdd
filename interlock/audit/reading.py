"""Fast reads of the event log for verification: one query a page, plain tuples.

The recorder API builds a dict and a Notification per event and a UUID from each id;
the verifier needs the canonical id text, the version, the topic and the bytes, so on
PostgreSQL and SQLite it asks for just those (`verify --all`, checkpoints, retention).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import ApplicationRecorder
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier

from interlock.audit.integrity import Row, Rows, Verifier
from interlock.domain import Interlock
from interlock.domain.storage.keys import Keyring


def verifier(app: Interlock, keys: Keyring | None) -> Verifier:
    """A verifier of the app's store that reads it with the fastest reader there is."""
    return Verifier(app.recorder, app.mapper, keys, rows=fast_rows(app.recorder))


def fast_rows(recorder: ApplicationRecorder) -> Rows | None:
    """A page reader for the recorder's store, or None (the recorder API will do)."""
    if isinstance(recorder, PostgresApplicationRecorder):
        return _postgres_rows(recorder)
    if isinstance(recorder, SQLiteApplicationRecorder):
        return _sqlite_rows(recorder)
    return None


def _postgres_rows(recorder: PostgresApplicationRecorder) -> Rows:
    datastore = recorder.datastore
    statement = SQL(
        "SELECT notification_id, originator_id::text, originator_version, topic, state "
        "FROM {}.{} WHERE notification_id > %s ORDER BY notification_id LIMIT %s"
    ).format(Identifier(datastore.schema), Identifier(recorder.events_table_name))

    def rows(after: int, limit: int) -> Sequence[Row]:
        with datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
            curs.execute(statement, (after, limit), prepare=True)
            found: list[Any] = curs.fetchall()
        return found
    return rows


def _sqlite_rows(recorder: SQLiteApplicationRecorder) -> Rows:
    statement = ("SELECT rowid, originator_id, originator_version, topic, state "  # the
                 f'FROM "{recorder.events_table_name}" WHERE rowid > ? '  # library's table
                 "ORDER BY rowid LIMIT ?")

    def rows(after: int, limit: int) -> Sequence[Row]:
        with recorder.datastore.transaction(commit=False) as curs:
            curs.execute(statement, (after, limit))
            return [(n, _hyphenated(i), v, t, s) for n, i, v, t, s in curs.fetchall()]
    return rows


def _hyphenated(hex_id: str) -> str:
    """SQLite keeps a UUID as 32 hex digits; the chain hashes its canonical text."""
    if len(hex_id) != 32:
        return hex_id  # not the library's form: the chain check will say so
    return f"{hex_id[:8]}-{hex_id[8:12]}-{hex_id[12:16]}-{hex_id[16:20]}-{hex_id[20:]}"
