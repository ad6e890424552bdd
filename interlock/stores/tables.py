"""Interlock's own small tables beside the events (keys, snapshots): one statement at a time,
written once with `?` and `{t}` and run on SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder
from psycopg.sql import SQL, Identifier

from interlock.domain import Interlock

Run = Callable[[Any, tuple[Any, ...]], list[Any]]
MANY = 500  # SQLite takes at most 999 parameters


class Table:
    """A table of the app's store: `sql` formats a statement for it, `run` executes one
    (atomic on its own), `transact` several in one transaction, `create` its CREATE TABLE
    IF NOT EXISTS."""

    def __init__(self, run: Run, transact: Callable[[list[Any]], None], name: Any) -> None:
        self.run, self.transact, self.name = run, transact, name
        self._in: dict[tuple[str, int], Any] = {}

    def create(self, text: str) -> None:
        statement = self.sql(text)
        if isinstance(self.name, Identifier):  # CREATE races with itself across workers
            lock = SQL("SELECT pg_advisory_xact_lock(hashtext({}))").format(
                self.name.as_string(None))
            self.transact([lock, statement])
        else:
            self.transact([statement])

    def run_in(self, text: str, keys: Sequence[Any], run: Run | None = None) -> list[Any]:
        """Run `text`, whose `IN (?)` takes `keys` (in chunks SQLite accepts); the rows."""
        rows: list[Any] = []
        for at in range(0, len(keys), MANY):
            chunk = tuple(keys[at:at + MANY])
            statement = self._in.get((text, len(chunk)))
            if statement is None:
                expanded = text.replace("IN (?)", "IN (" + ", ".join("?" * len(chunk)) + ")")
                statement = self._in[text, len(chunk)] = self.sql(expanded)
            rows += (run or self.run)(statement, chunk)
        return rows

    def keep_outside(self, column: str) -> None:
        """On PostgreSQL, store `column`'s large values out of line and uncompressed (STORAGE
        EXTERNAL): an encrypted value does not compress, and such a value of 2 MB reads in
        about half the time (measured here). A no-op on SQLite."""
        if not isinstance(self.name, Identifier):
            return
        rows = self.run(SQL("SELECT attstorage FROM pg_attribute WHERE attrelid = %s::regclass"
                            " AND attname = %s"), (self.name.as_string(None), column))
        if rows and rows[0][0] != "e":
            # The ALTER takes an ACCESS EXCLUSIVE lock: waiting behind a long reader would
            # hold every load of the table up, so it gives up (raises) after a second.
            self.transact([SQL("SET LOCAL lock_timeout = '1s'"), SQL(
                "ALTER TABLE {t} ALTER COLUMN {c} SET STORAGE EXTERNAL").format(
                t=self.name, c=Identifier(column))])

    def sql(self, text: str) -> Any:
        if isinstance(self.name, Identifier):
            return SQL(text.replace("?", "%s").replace("{blob}", "BYTEA")).format(t=self.name)
        return text.replace("{blob}", "BLOB").format(t=self.name)


def table_of(app: Interlock, name: str) -> Table | None:
    """The table `name` in the app's SQL store; None for the memory store."""
    recorder = app.recorder
    if isinstance(recorder, PostgresApplicationRecorder):
        datastore = recorder.datastore

        def run_pg(statement: Any, params: tuple[Any, ...]) -> list[Any]:
            # one round trip: the library's pool hands out autocommit connections
            with datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(statement, params, binary=True)  # bytea as it is, not hex
                return [tuple(r.values()) for r in curs.fetchall()] if curs.description else []

        def transact_pg(statements: list[Any]) -> None:
            with datastore.transaction(commit=True) as curs:
                for statement in statements:
                    curs.execute(statement)
        return Table(run_pg, transact_pg, Identifier(datastore.schema, name))
    if isinstance(recorder, SQLiteApplicationRecorder):
        lite = recorder.datastore

        def run_lite(statement: Any, params: tuple[Any, ...]) -> list[Any]:
            with lite.transaction(commit=True) as curs:
                curs.execute(statement, params)
                return list(curs.fetchall())

        def transact_lite(statements: list[Any]) -> None:
            with lite.transaction(commit=True) as curs:
                for statement in statements:
                    curs.execute(statement)
        return Table(run_lite, transact_lite, name)
    return None
