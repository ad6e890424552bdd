"""The PostgreSQL backend: tracked recorders whose rows and position commit in one transaction."""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import (
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresTrackingRecorder,
)
from psycopg import Cursor, sql
from psycopg.rows import DictRow
from psycopg.types.json import Json

from interlock.domain.errors import InvalidRequestError, UnavailableError
from interlock.projections.engine.live import LeaderLostError
from interlock.projections.engine.sql import (
    JointBatchError,
    PositionConflictError,
    ReadModel,
    Row,
    SqlView,
    ViewStore,
)
from interlock.projections.views.registry import READ_MODELS
from interlock.stores.postgres import schema_lock

# `json`, not `jsonb`: jsonb refuses "\u0000", and a view must accept every recorded event.
_TYPES = {"json": sql.SQL("json"), "ts": sql.SQL("timestamptz")}
# Rows and position commit together, so a crash that loses a view's commit only rewinds
# it to an earlier exact state: its transactions need not wait for the WAL flush.
_LOCK = (
    "SELECT set_config('synchronous_commit', 'off', true), notification_id FROM {tracking}"
    " WHERE application_name = %(app)s FOR UPDATE"
)
# Compare-and-set: the position moves from `start` to `upto`, or nothing is written.
_ADVANCE = (
    "INSERT INTO {tracking} AS t VALUES (%(app)s, %(upto)s) ON CONFLICT (application_name)"
    " DO UPDATE SET notification_id = EXCLUDED.notification_id"
    " WHERE t.notification_id = %(start)s RETURNING notification_id"
)

# The joint batch's compare-and-set, which has not locked the row first: from a position
# the row must exist and hold it (a view reset meanwhile has no row, which an upsert would
# take for a first batch); from 0 the upsert above (a concurrent first batch conflicts).
_ADVANCE_FROM = (
    "UPDATE {tracking} SET notification_id = %(upto)s WHERE application_name = %(app)s"
    " AND notification_id = %(start)s RETURNING notification_id"
)

_MARK = "INSERT INTO {tracking} VALUES (%(marker)s, 1) ON CONFLICT DO NOTHING"


class PostgresViewStore(PostgresTrackingRecorder, ViewStore):
    """One view in PostgreSQL; tables are `<prefix>_<name>` in the store's schema."""

    dialect = "postgresql"

    def __init__(
        self, datastore: PostgresDatastore, view: type[SqlView], *, prefix: str = "interlock",
        application_name: str = "Interlock",
    ) -> None:
        self.view_name, self.tables, self.ddl = view.view_name, view.tables, view.ddl
        super().__init__(datastore, tracking_table_name=f"{prefix}_{self.view_name}_tracking")
        self.application_name = application_name
        schema = datastore.schema
        self._names: dict[str, sql.Composable] = {
            name: sql.Identifier(f"{prefix}_{name}") if name.endswith("_idx")
            else sql.Identifier(schema, f"{prefix}_{name}")
            for name in self.tables
        }
        self._names["tracking"] = sql.Identifier(schema, self.tracking_table_name)
        self._composed: dict[str, bytes] = {}
        self._texts: dict[str, str] = {}
        self._local = _InBatch()
        self.sql_create_statements.extend(
            sql.SQL(t).format(**self._names, **_TYPES) for t in self.ddl)

    def _q(self, template: str) -> bytes:
        """The statement as bytes, rendered once: psycopg re-renders a Composed per call."""
        query = self._composed.get(template)
        if query is None:
            query = sql.SQL(template).format(**self._names, **_TYPES).as_bytes(None)
            self._composed[template] = query
        return query

    def _text(self, template: str) -> str:
        """The statement as text, its `%(name)s` placeholders left for `_literals`."""
        text = self._texts.get(template)
        if text is None:
            text = self._texts[template] = self._q(template).decode()
        return text

    def setup(self) -> None:
        with schema_lock(self.datastore):
            self._mark_migrated()
            self.create_table()

    def _mark_migrated(self) -> None:
        """Give a tracking table that lacks the library's migration marker its marker.

        Every tracking table of a view is single-row (ours, and the CAS needs it); without
        the marker the library takes one for a legacy table and renames it to `bkup1_...`,
        which collides the second time. Tables recreated by earlier rebuilds lacked it.
        """
        self.tracking_table_exists = False
        self.tracking_migration_previous = self.tracking_migration_current = None
        with self.datastore.transaction(commit=True) as curs:
            found = curs.execute("SELECT to_regclass(%s) AS t", (self._qualified(),)).fetchone()
            if found and found["t"] is not None:
                curs.execute(self._q(_MARK), {"marker": self.table_migration_identifier})

    def _qualified(self) -> str:
        return sql.Identifier(self.datastore.schema, self.tracking_table_name).as_string(None)

    def position(self) -> int:
        return self.max_tracking_id(self.application_name) or 0

    @contextmanager
    def batch(self, start: int, upto: int) -> Iterator[None]:
        joint = self._local.joint
        if joint is not None:
            with joint.batch(self, start, upto):
                yield
            return
        with self.datastore.transaction(commit=True) as curs:
            found = self._locked_position(curs)
            if found != start:
                raise PositionConflictError(self.view_name, start, found)
            self._local.cursor, self._local.rows = curs, []
            try:
                yield
                _send(curs, None, self._local.rows)
                self._advance(curs, start, upto)
            finally:
                self._local.cursor, self._local.rows = None, None

    def _locked_position(self, curs: Cursor[DictRow]) -> int:
        row = curs.execute(self._q(_LOCK), {"app": self.application_name}).fetchone()
        return int(row["notification_id"]) if row else 0

    def _advance(self, curs: Cursor[DictRow], start: int, upto: int) -> None:
        params = {"app": self.application_name, "start": start, "upto": upto}
        if curs.execute(self._q(_ADVANCE), params).fetchone() is None:
            raise PositionConflictError(self.view_name, start, None)

    def joint(self, others: Sequence[ViewStore]) -> AbstractContextManager[None] | None:
        stores = [self, *others]
        if not all(isinstance(o, PostgresViewStore) and o.datastore is self.datastore
                   for o in others):
            return None
        return _joint(self.datastore, stores)  # type: ignore[arg-type]

    def advance_part(self, i: int, start: int, upto: int) -> str:
        """The compare-and-set of the position as the `i`th part (`a{i}`) of the joint
        batch's one statement (see `_Joint.advance`)."""
        text = self._text(_ADVANCE_FROM if start else _ADVANCE) % _literals(
            {"app": self.application_name, "start": start, "upto": upto})
        return f"a{i} AS ({text})"

    def drop(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            self._drop(curs)

    def reset(self) -> None:
        with schema_lock(self.datastore), self.datastore.transaction(commit=True) as curs:
            self._drop(curs)
            # A table created now is new: the library inserts its migration marker.
            self.tracking_table_exists = False
            self.tracking_migration_previous = self.tracking_migration_current = None
            self._create_table(curs)

    def _drop(self, curs: Cursor[DictRow]) -> None:
        for name in (*self.tables, "tracking"):
            if not name.endswith("_idx"):
                curs.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self._names[name]))

    def run(self, template: str, params: Mapping[str, Any]) -> None:
        rows = self._local.rows
        assert rows is not None, "writes happen inside batch()"
        rows.append((self, template, params))

    def run_many(self, template: str, params: Sequence[Mapping[str, Any]]) -> None:
        rows = self._local.rows
        assert rows is not None, "writes happen inside batch()"
        rows.extend((self, template, p) for p in params)

    def fetch(self, template: str, params: Mapping[str, Any]) -> list[Row]:
        for name, value in params.items():
            if isinstance(value, str) and "\x00" in value:
                raise InvalidRequestError(f"{name} contains a NUL character", parameter=name)
        with self.datastore.get_connection() as conn:
            return list(conn.execute(self._q(template), params).fetchall())

    def encode_json(self, value: Any) -> Any:
        return Json(value)

    def encode_ts(self, value: datetime) -> Any:
        return value

    def load_json(self, value: Any) -> Any:
        return value

    def load_ts(self, value: Any) -> datetime:
        assert isinstance(value, datetime)
        return value


class _InBatch(threading.local):
    """The batch this thread is writing in: the views' thread and a request or the webhook
    deliverer may each be inside a batch of the same view at once, in transactions of their
    own; sharing one slot, one would write into (or send) the other's rows."""

    cursor: Cursor[DictRow] | None = None
    rows: list[_Row] | None = None  # the batch's statements, sent when it ends
    joint: _Joint | None = None


class _Joint:
    """The views' batches of one pass in one transaction and one round trip.

    Each view's rows are queued, and sent when the pass ends after the
    positions' compare-and-set; any position that moved rolls the whole transaction back.
    """

    def __init__(self, curs: Cursor[DictRow]) -> None:
        self.curs = curs
        self.moves: list[tuple[PostgresViewStore, int, int]] = []
        self.rows: list[_Row] = []
        self.row: DictRow | None = None

    @contextmanager
    def batch(self, store: PostgresViewStore, start: int, upto: int) -> Iterator[None]:
        store._local.cursor, store._local.rows = self.curs, self.rows
        mark = len(self.rows)
        try:
            yield
            self.moves.append((store, start, upto))
        except BaseException:
            del self.rows[mark:]  # the runner goes on without this view's rows
            raise
        finally:
            store._local.cursor, store._local.rows = None, None

    def advance(self) -> None:
        """Send every view's compare-and-set and the transaction's commit setting as one
        statement (one statement per view cost a tenth of a pass), then every row (`_send`).
        Its parts are data-modifying WITH queries, run once whatever the outer SELECT
        reads of them, and the outer SELECT counts the rows each one moved."""
        parts = [store.advance_part(i, start, upto)
                 for i, (store, start, upto) in enumerate(self.moves)]
        counts = "".join(f", (SELECT count(*) FROM a{i}) AS n{i}" for i in range(len(parts)))
        query = ("WITH " + ", ".join(parts) + " " if parts else "") + \
            "SELECT set_config('synchronous_commit', 'off', true) AS sc" + counts
        self.row = _send(self.curs, query, self.rows)

    def check(self) -> None:
        row = self.row
        for i, (store, start, _) in enumerate(self.moves):
            if row is None or row[f"n{i}"] != 1:
                raise PositionConflictError(store.view_name, start, None)


@contextmanager
def _joint(datastore: PostgresDatastore, stores: list[PostgresViewStore]) -> Iterator[None]:
    try:
        with datastore.transaction(commit=True) as curs:
            joint = _Joint(curs)
            for store in stores:
                store._local.joint = joint
            try:
                yield
                joint.advance()
            finally:
                for store in stores:
                    store._local.joint = None
            joint.check()  # raising here rolls every view's rows back
    except (PositionConflictError, psycopg.Error, PersistenceError) as exc:
        raise JointBatchError(str(exc)) from exc


_Row = tuple[PostgresViewStore, str, Mapping[str, Any]]
# A batch of up to this many rows goes as one script of statements with literals: one
# round trip, and a quarter of psycopg's work per statement (25 rows: client CPU 0.28 ms
# against 0.70 prepared in a pipeline, PostgreSQL's 0.30 against 0.43). A larger one (a
# catch-up, a rebuild) goes prepared in a pipeline: planning each of thousands of
# statements again cost PostgreSQL more than psycopg saves (the reviews view's catch-up
# 9,500 events/s against 18,100).
SCRIPT_ROWS = 200


def _send(curs: Cursor[DictRow], first: str | None, rows: list[_Row]) -> DictRow | None:
    """`first` (a statement with its literals in it, or None), then the rows, in order, in
    the cursor's transaction; `first`'s row."""
    if len(rows) <= SCRIPT_ROWS:
        script = [store._text(template) % _literals(params) for store, template, params in rows]
        if first is None and not script:
            return None
        # the first result is the first statement's: psycopg leaves the cursor on it
        curs.execute(";\n".join(script if first is None else [first, *script]).encode())
        return curs.fetchone() if first is not None else None
    found = curs.execute(first.encode()).fetchone() if first is not None else None
    with curs.connection.pipeline():
        for (store, template), same in itertools.groupby(rows, key=lambda r: r[:2]):
            curs.executemany(store._q(template), [_storable(params) for _, _, params in same])
    return found


def _storable(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """PostgreSQL text cannot hold NUL; a model may still send one (shown as U+FFFD)."""
    for value in params.values():  # a loop, not any(genexpr): this runs for every row
        if isinstance(value, str) and "\x00" in value:
            break
    else:
        return params
    return {k: v.replace("\x00", "\ufffd") if isinstance(v, str) else v for k, v in params.items()}


def _literals(params: Mapping[str, Any]) -> dict[str, str]:
    """Each value as an SQL literal, for a statement of a batch's script."""
    return {name: _RENDER.get(type(value), _literal)(value) for name, value in params.items()}


def _literal(value: Any) -> str:
    """`value` as an SQL literal, typed as psycopg would bind it: what `_RENDER` has no
    renderer for (a naive or non-finite value, a subclass) psycopg renders."""
    if value is None:
        return "NULL"
    return sql.Literal(value).as_string(None)


def _quoted(text: str) -> str:
    """A string literal, whatever `standard_conforming_strings` says: quotes doubled, and
    backslashes doubled in an escape string. PostgreSQL text cannot hold NUL; a model may
    still send one (shown as U+FFFD)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if "\\" in text:
        return " E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    return "'" + text.replace("'", "''") + "'"


def _timestamp(value: datetime) -> str:
    return f"'{value.isoformat()}'::timestamptz" if value.tzinfo is not None else _literal(value)


def _float(value: float) -> str:
    return f"{value!r}::float8" if math.isfinite(value) else _literal(value)


# The common types, rendered here (psycopg's adapters cost more than the statement).
_RENDER: dict[type, Callable[[Any], str]] = {
    str: _quoted,
    int: lambda value: f" {value:d}",  # the space: never `--` after a minus sign
    bool: lambda value: "true" if value else "false",
    UUID: lambda value: f"'{value}'::uuid",
    datetime: _timestamp,
    Json: lambda value: _quoted((value.dumps or json.dumps)(value.obj)) + "::json",
    float: _float,
}


def postgres_views(
    datastore: PostgresDatastore, application_name: str = "Interlock",
    read_models: Iterable[ReadModel] = READ_MODELS,
) -> list[SqlView]:
    """The views of `read_models` (the registry's by default) in the store, created if missing."""
    prefix = application_name.lower()
    return [m.open(PostgresViewStore(datastore, m.view, prefix=prefix,
                                     application_name=application_name))
            for m in read_models]


class AppendWaker:
    """Blocks until the event recorder NOTIFYs an append, or a timeout passes.

    LISTEN starts before the first catch-up, so an append committed between a pass and
    the next wait is still queued on the connection and wakes it at once.
    """

    def __init__(self, recorder: PostgresApplicationRecorder) -> None:
        self._stack = ExitStack()
        self._conn = self._stack.enter_context(recorder.datastore.get_connection())
        self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(recorder.channel_name)))
        self._conn.commit()  # a LISTEN takes effect when its transaction commits

    @property
    def connection(self) -> Any:
        return self._conn

    def wait(self, timeout: float) -> None:
        """Return on the next append (those already queued included) or after `timeout`."""
        for _ in self._conn.notifies(timeout=timeout, stop_after=1):
            pass
        for _ in self._conn.notifies(timeout=0):  # appends since then: one pass for all
            pass

    def close(self) -> None:
        """Stop listening and give the connection back, even a broken one (the pool drops it)."""
        try:
            self._conn.execute("UNLISTEN *")
            self._conn.commit()
        finally:
            self._stack.close()


class ViewLeader:
    """One process at a time applies a schema's views; the others read them.

    The leader holds a session advisory lock on the connection that LISTENs for appends,
    so it wakes on every process's commits; if it dies, its session ends, the lock is
    free and another process takes over on its next try. Several servers (or
    `--workers N`) then apply each event once instead of racing for every batch.
    """

    def __init__(self, recorder: PostgresApplicationRecorder, name: str) -> None:
        self._recorder = recorder
        self._key = f"interlock-views:{recorder.datastore.schema}:{name}"
        self._waker: AppendWaker | None = None
        self.leading = False

    def try_lead(self) -> bool:
        """True if this process leads (now or already); store errors propagate."""
        if self.leading:
            return True
        try:
            if self._waker is None:
                self._waker = AppendWaker(self._recorder)
            conn = self._waker.connection
            row = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s)) AS leading",
                               (self._key,)).fetchone()
            conn.commit()  # notifications arrive between transactions
        except (psycopg.Error, PersistenceError, UnavailableError) as exc:
            raise LeaderLostError(exc) from exc
        self.leading = bool(row and row["leading"])
        return self.leading

    def wait(self, timeout: float) -> None:
        """Until the next append of any process (or `timeout`)."""
        assert self._waker is not None, "lead first"
        try:
            self._waker.wait(timeout)
        except (psycopg.Error, PersistenceError, UnavailableError) as exc:
            raise LeaderLostError(exc) from exc

    def interrupt(self) -> None:
        """Wake the leader's wait now (a NOTIFY like an append's)."""
        channel = sql.Identifier(self._recorder.channel_name)
        with suppress(psycopg.Error, PersistenceError, UnavailableError), \
                self._recorder.datastore.get_connection() as conn:
            conn.execute(sql.SQL("NOTIFY {}").format(channel))
            conn.commit()

    def close(self) -> None:
        """Give up leadership (closing the session releases the lock)."""
        waker, self._waker, self.leading = self._waker, None, False
        if waker is None:
            return
        with suppress(psycopg.Error, PersistenceError):
            # the connection goes back to the pool: its session must not keep the lock
            waker.connection.execute("SELECT pg_advisory_unlock_all()")
            waker.connection.commit()
        with suppress(psycopg.Error, PersistenceError):
            waker.close()  # returns the connection, broken or not
