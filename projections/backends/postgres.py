"""The PostgreSQL backend: tracked recorders whose rows and position commit in one transaction."""

from __future__ import annotations

import copy
import functools
import itertools
import json
import re
import threading
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import (
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresTrackingRecorder,
)
from psycopg import Cursor, pq, sql
from psycopg.adapt import PyFormat, Transformer
from psycopg.generators import fetch_many, send
from psycopg.postgres import types as postgres_types
from psycopg.rows import DictRow
from psycopg.types.json import Json

from interlock.domain.chat.ids import id_text
from interlock.domain.chat.jsonsafe import c_json_encoder
from interlock.domain.errors import InvalidRequestError, UnavailableError
from interlock.projections.backends.replicas import Replica, ReplicaUnavailableError
from interlock.projections.engine.live import LeaderLostError
from interlock.projections.engine.sql import (
    VERSION_KEY,
    JointBatchError,
    PositionConflictError,
    ReadModel,
    Row,
    SqlView,
    ViewStore,
)
from interlock.stores import libpq
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
_POSITION = "SELECT notification_id FROM {tracking} WHERE application_name = %(app)s"
_VERSION = ("INSERT INTO {tracking} AS t VALUES (%(key)s, %(version)s) ON CONFLICT"
            " (application_name) DO UPDATE SET notification_id = EXCLUDED.notification_id")


class PostgresViewStore(PostgresTrackingRecorder, ViewStore):
    """One view in PostgreSQL; tables are `<prefix>_<name>` in the store's schema."""

    dialect = "postgresql"

    def __init__(
        self, datastore: PostgresDatastore, view: type[SqlView], *, prefix: str = "interlock",
        application_name: str = "Interlock",
    ) -> None:
        self.view_name, self.tables, self.ddl = view.view_name, view.tables, view.ddl
        self.version = view.version
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
        self._bounds: dict[str, tuple[bytes, tuple[str, ...]]] = {}
        self._parts: dict[tuple[int, bool], bytes] = {}  # `advance_part`'s texts
        self._local = _InBatch()
        self.replica: Replica | None = None  # set on a twin that reads on a replica (`on`)
        self.sql_create_statements.extend(
            sql.SQL(t).format(**self._names, **_TYPES) for t in self.ddl)

    def _q(self, template: str) -> bytes:
        """The statement as bytes, rendered once: psycopg re-renders a Composed per call."""
        query = self._composed.get(template)
        if query is None:
            query = sql.SQL(template).format(**self._names, **_TYPES).as_bytes(None)
            self._composed[template] = query
        return query

    def _bound(self, template: str) -> tuple[bytes, tuple[str, ...]]:
        """The statement with `$n` placeholders, and the parameter each stands for."""
        bound = self._bounds.get(template)
        if bound is None:
            bound = self._bounds[template] = _numbered(self._q(template))
        return bound

    def setup(self) -> None:
        with schema_lock(self.datastore):
            self._mark_migrated()
            if self._recorded_version() != self.version:  # another shape: rebuilt
                self._reset()
            else:
                self.create_table()

    def _recorded_version(self) -> int:
        """The version of the view's shape its tracking table records (none: 1; no table:
        1 too, so a first version creates its tables as ever and a later one resets)."""
        with self.datastore.transaction(commit=False) as curs:
            found = curs.execute("SELECT to_regclass(%s) AS t", (self._qualified(),)).fetchone()
            if not found or found["t"] is None:
                return 1
            row = curs.execute(self._q("SELECT notification_id FROM {tracking}"
                                       " WHERE application_name = %(key)s"),
                               {"key": VERSION_KEY}).fetchone()
        return int(row["notification_id"]) if row else 1

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
        if self.replica is not None:  # the view's position as replicated there
            rows = self.replica.fetch(self._q(_POSITION), {"app": self.application_name},
                                      counted=False)
            return int(rows[0]["notification_id"]) if rows else 0
        return self.max_tracking_id(self.application_name) or 0

    def positions(self, others: Sequence[ViewStore]) -> list[int]:
        """Every store's position in one statement when they share this datastore (one
        statement each cost an idle views' pass five round trips, twice a second)."""
        stores = [self, *others]
        if self.replica is not None or not all(
                isinstance(o, PostgresViewStore) and o.datastore is self.datastore
                and o.replica is None for o in others):
            return super().positions(others)
        params: dict[str, Any] = {}
        parts = []
        for i, store in enumerate(stores):
            assert isinstance(store, PostgresViewStore)
            params[f"app{i}"] = store.application_name
            parts.append(b"(%s) AS p%d" % (store._q(_POSITION.replace(
                "%(app)s", f"%(app{i})s")), i))
        with self.datastore.get_connection() as conn:
            row = conn.execute(b"SELECT " + b", ".join(parts), params).fetchone()
        assert row is not None
        return [int(row[f"p{i}"] or 0) for i in range(len(stores))]

    def on(self, replica: Replica) -> PostgresViewStore:
        """This view's store reading on `replica`: its queries run there, and any the
        replica fails or refuses runs here instead; it writes nothing (`batch` refuses)."""
        twin = copy.copy(self)
        twin.replica, twin._local = replica, _InBatch()
        return twin

    @contextmanager
    def batch(self, start: int, upto: int) -> Iterator[None]:
        assert self.replica is None, "a view is written on the primary, never on a replica"
        joint = self._local.joint
        if joint is not None:  # the pass's joint transaction takes the rows and the move
            self._local.rows = joint.rows
            try:
                yield
                joint.moves.append((self, start, upto))
            finally:
                self._local.rows = None
            return
        with self.datastore.transaction(commit=True) as curs:
            found = self._locked_position(curs)
            if found != start:
                raise PositionConflictError(self.view_name, start, found)
            self._local.rows = []
            try:
                yield
                _send(curs, None, {}, self._local.rows)
                self._advance(curs, start, upto)
            finally:
                self._local.rows = None

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

    def advance_part(self, i: int, start: int, upto: int,
                     params: dict[str, Any]) -> bytes:
        """The compare-and-set of the position as the `i`th part (`a{i}`) of the joint
        batch's one statement (see `_Joint.advance`); its parameters go into `params`."""
        params.update({f"app{i}": self.application_name, f"start{i}": start,
                       f"upto{i}": upto})
        part = self._parts.get((i, bool(start)))
        if part is None:  # the same text every pass: rendered once
            template = (_ADVANCE_FROM if start else _ADVANCE).replace(
                "%(app)s", f"%(app{i})s").replace("%(start)s", f"%(start{i})s").replace(
                "%(upto)s", f"%(upto{i})s")
            part = self._parts[(i, bool(start))] = b"a%d AS (%s)" % (i, self._q(template))
        return part

    def drop(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            self._drop(curs)

    def reset(self) -> None:
        with schema_lock(self.datastore):
            self._reset()

    def _reset(self) -> None:
        """Drop and recreate the view, its version recorded (the caller holds the lock)."""
        with self.datastore.transaction(commit=True) as curs:
            self._drop(curs)
            # A table created now is new: the library inserts its migration marker.
            self.tracking_table_exists = False
            self.tracking_migration_previous = self.tracking_migration_current = None
            self._create_table(curs)
            if self.version != 1:
                curs.execute(self._q(_VERSION), {"key": VERSION_KEY, "version": self.version})

    def _drop(self, curs: Cursor[DictRow]) -> None:
        # The position first, in the order a batch locks (position, then rows): a batch in
        # flight finishes before the drop, where rows first deadlocked with it.
        for name in ("tracking", *self.tables):
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
        if self.replica is not None:
            try:
                return list(self.replica.fetch(self._q(template), params))
            except ReplicaUnavailableError:
                pass  # the primary has every row the replica was to show, and maybe more
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

    rows: list[_Row] | None = None  # the batch's statements, sent when it ends
    joint: _Joint | None = None


class _Joint:
    """The views' batches of one pass in one transaction: one commit for all, and one round
    trip (`commit`).

    Each view's rows are queued while the pass applies its events; when it ends, BEGIN, the
    positions' compare-and-set, every row and COMMIT go in one pipeline. A position that
    moved fails the compare-and-set's statement, so nothing after it runs and the whole
    transaction is rolled back.
    """

    def __init__(self) -> None:
        self.moves: list[tuple[PostgresViewStore, int, int]] = []  # each view's batch
        self.rows: list[_Row] = []

    def commit(self, conn: psycopg.Connection[Any]) -> None:
        """Send every view's compare-and-set and the transaction's commit setting as one
        statement (one statement per view cost a tenth of a pass), then every row, in one
        transaction of their own (`_pipelined`). Its parts are data-modifying WITH queries,
        run once whatever the outer SELECT reads of them; the outer SELECT counts the rows
        each one moved, and fails (an integer that is not one) unless each moved its row:
        that failure aborts the transaction before any row is written, and its COMMIT."""
        params: dict[str, Any] = {}
        parts = [store.advance_part(i, start, upto, params)
                 for i, (store, start, upto) in enumerate(self.moves)]
        if parts:
            counts = b", ".join(b"(SELECT count(*) FROM a%d) AS n%d" % (i, i)
                                for i in range(len(parts)))
            moved = b" || ',' || ".join(b"n%d" % i for i in range(len(parts)))
            query = (b"WITH " + b", ".join(parts) + b", n AS (SELECT " + counts + b")"
                     b" SELECT set_config('synchronous_commit', 'off', true) AS sc, CASE WHEN "
                     + b" + ".join(b"n%d" % i for i in range(len(parts)))
                     + b" = %d THEN 0 ELSE ('a view''s position moved under its pass: rows'"
                     b" || ' moved ' || %s)::int END AS moved FROM n" % (len(parts), moved))
        else:
            query = b"SELECT set_config('synchronous_commit', 'off', true) AS sc"
        _pipelined(conn, self.rows, (query, params), begin=True)


@contextmanager
def _joint(datastore: PostgresDatastore, stores: list[PostgresViewStore]) -> Iterator[None]:
    joint = _Joint()
    for store in stores:
        store._local.joint = joint
    try:
        yield  # the views queue their rows: no statement is sent before the commit
    finally:
        for store in stores:
            store._local.joint = None
    try:
        with datastore.get_connection() as conn:
            joint.commit(conn)
    except (psycopg.Error, PersistenceError) as exc:
        raise JointBatchError(str(exc)) from exc


_Row = tuple[PostgresViewStore, str, Mapping[str, Any]]
# A batch's rows go straight through libpq's pipeline, whatever their number, their values
# encoded here. They went through psycopg's executemany past 1,000 rows in a joint pass and
# 200 in one view's, which adapts each value in Python for every row and waits on the
# socket between them: a busy server's pass (64 clients at about 120 cycles a second: 1,200
# rows and more) cost 2.5 times the CPU a cycle that way (1.11 against 0.44 ms in the views'
# thread, the whole machine's 4.1 against 1.2 ms), and one view's catch-up ran at half the
# speed (bench/HISTORY.md). They are sent SYNC_ROWS statements to a sync, each sync's results
# read before the next are sent, so what PostgreSQL answers waiting to be read stays bounded
# (a pipeline that sends everything before it reads can fill both sockets' buffers and
# stall). The values are parameters, never statement text: a failing statement is logged by
# PostgreSQL without them.
SYNC_ROWS = 1000  # statements a sync of the pipeline
PREPARED_MAX = 500  # statements a session prepares for the views; past it, parsed each time
_PLACEHOLDER = re.compile(rb"%\((\w+)\)s|%%")


@functools.lru_cache(maxsize=256)  # the joint pass's statement: the same text every pass
def _numbered(query: bytes) -> tuple[bytes, tuple[str, ...]]:
    """`query` with `$n` for its `%(name)s` placeholders (and `%` for `%%`), and the name
    each number stands for."""
    names: list[str] = []

    def number(match: re.Match[bytes]) -> bytes:
        if match[1] is None:
            return b"%"
        name = match[1].decode()
        if name not in names:
            names.append(name)
        return b"$%d" % (names.index(name) + 1)

    return _PLACEHOLDER.sub(number, query), tuple(names)


def _send(curs: Cursor[DictRow], first: bytes | None, params: Mapping[str, Any],
          rows: list[_Row]) -> Mapping[str, Any] | None:
    """The statement `first` (with `params`; None: none), then the rows in order, in the
    cursor's transaction; `first`'s row."""
    if not rows and first is None:
        return None
    return _pipelined(curs.connection, rows, None if first is None else (first, params))


def _pipelined(conn: psycopg.Connection[Any], rows: list[_Row],
               first: tuple[bytes, Mapping[str, Any]] | None = None, *,
               begin: bool = False) -> dict[str, Any] | None:
    """`first` (a statement and its parameters) and every row, each a statement with text
    parameters, queued in libpq's pipeline SYNC_ROWS at a time, each lot synced and its
    results read before the next is sent, in the transaction the connection is in; the first
    failure raises (the transaction is then aborted, and no later lot is sent). `first`'s
    row, its values as text.

    With `begin`, the connection is idle (autocommit) and the statements are a transaction
    of their own: BEGIN before them and COMMIT after them go in the same pipeline, so a
    pass of up to SYNC_ROWS rows costs one round trip, not three. Nothing after a failed
    statement runs, COMMIT included: the datastore's `get_connection` the caller holds rolls
    the transaction back as the failure leaves it, before the pool takes the connection.

    Each statement is prepared once a connection (per text and parameter types), in the
    pipeline before its first use: PostgreSQL then binds and runs it instead of parsing and
    planning it for every row, half its CPU a row (35 against 17 microseconds, measured)."""
    pg = conn.pgconn
    wanted = pq.TransactionStatus.IDLE if begin else pq.TransactionStatus.INTRANS
    if pg.transaction_status != wanted or pg.pipeline_status:
        raise psycopg.ProgrammingError(
            "a view's rows are written inside a transaction: the connection's, or (begin)"
            " one of their own on an idle connection")
    statements = [_BEGIN] if begin else []
    if first is not None:
        statements.append((*_numbered(first[0]), first[1]))
    statements += [(*store._bound(template), params) for store, template, params in rows]
    if begin:
        statements.append(_COMMIT)
    head = None
    for at in range(0, len(statements), SYNC_ROWS):
        sent, results = _lot(conn, statements[at:at + SYNC_ROWS])
        if at == 0 and first is not None:
            head = _head(results, sent, conn.info.encoding, skip=int(begin))
    return head


_BEGIN: tuple[bytes, tuple[str, ...], Mapping[str, Any]] = (b"BEGIN", (), {})
_COMMIT: tuple[bytes, tuple[str, ...], Mapping[str, Any]] = (b"COMMIT", (), {})


def _lot(conn: psycopg.Connection[Any], statements: list[tuple[bytes, tuple[str, ...],
                                                                Mapping[str, Any]]],
         ) -> tuple[list[bytes | None], list[Any]]:
    """The statements sent in one pipeline and synced once: what each result is (the name
    a prepare made, None: a statement's) and the results, checked (`_checked`). Every value
    is encoded before the pipeline begins: a value that cannot be raises its own error with
    nothing sent (a pipeline left half-sent refuses to end, and hides it)."""
    pg, encoding = conn.pgconn, conn.info.encoding
    encoded = []
    for query, names, params in statements:
        values, types = _encoded([params[name] for name in names], encoding, conn)
        encoded.append((query, values, types, libpq.typed_name(query, tuple(types))))
    prepared = libpq.prepared_on(pg)
    sent: list[bytes | None] = []  # a result each: the name a prepare made, None: a row's
    pg.enter_pipeline_mode()
    try:
        for query, values, types, name in encoded:
            if name not in prepared:
                if len(prepared) >= PREPARED_MAX:  # a session's statements stay bounded
                    pg.send_query_params(query, values, param_types=types)
                    sent.append(None)
                    continue
                pg.send_prepare(name, query, param_types=types)
                prepared.add(name)  # for the next rows of this pipeline; checked below
                sent.append(name)
            pg.send_query_prepared(name, values)
            sent.append(None)
        results = conn.wait(_synced(pg))
    except BaseException:
        prepared.difference_update(n for n in sent if n)  # not known made: prepared anew
        raise
    finally:
        if pg.pipeline_status and pg.status != pq.ConnStatus.BAD:  # a broken one raises its
            pg.exit_pipeline_mode()                                # own error, not this
    return sent, _checked(prepared, sent, results, encoding)


def _checked(prepared: set[bytes], sent: list[bytes | None], results: list[Any],
             encoding: str) -> list[Any]:
    """`results`, the names they prepared kept (and those they did not forgotten), or the
    first failure raised. A statement gone from the session (DEALLOCATE ALL, DISCARD ALL)
    forgets them all; one there already stays known: the caller's retry then succeeds."""
    failed = None
    if len(results) != len(sent):
        prepared.difference_update(n for n in sent if n)
    for made, result in zip(sent, results, strict=False):
        status = result.status
        if status == pq.ExecStatus.FATAL_ERROR:
            state = result.error_field(pq.DiagnosticField.SQLSTATE)
            if state == libpq.GONE:
                prepared.clear()
            elif made is not None and state != libpq.EXISTS:
                prepared.discard(made)
            failed = failed or result
        elif made is not None and status != pq.ExecStatus.COMMAND_OK:  # skipped: aborted
            prepared.discard(made)
    if failed is not None:
        raise psycopg.errors.error_from_result(failed, encoding=encoding)
    return results


def _head(results: list[Any], sent: list[bytes | None], encoding: str,
          skip: int = 0) -> dict[str, Any] | None:
    """The row of the first statement after the `skip` first (None: no row), its values as
    text."""
    ran = (r for made, r in zip(sent, results, strict=False) if made is None)
    head = next(itertools.islice(ran, skip, None), None)  # not a list of every row's result
    if head is None or not head.ntuples:
        return None
    return {(head.fname(i) or b"").decode(): None if (v := head.get_value(0, i)) is None
            else bytes(v).decode(encoding) for i in range(head.nfields)}


def _synced(pg: Any) -> Generator[Any, Any, list[Any]]:
    """Sync the pipeline, flush it, and read every result up to the sync.

    Once all is sent it waits for the socket to be readable only: waiting for readable or
    writable (as `pipeline_communicate` does, to interleave sending) returns at once on a
    writable socket, so the thread spun until PostgreSQL answered (hundreds of wake-ups a
    pass)."""
    pg.pipeline_sync()
    yield from send(pg)
    results: list[Any] = []
    while True:
        group = yield from fetch_many(pg)
        if not group:
            raise psycopg.OperationalError("the pipeline ended before its sync")
        if group[0].status == pq.ExecStatus.PIPELINE_SYNC:
            return results
        results.extend(group)


def _encoded(values: list[Any], encoding: str,
             conn: psycopg.Connection[Any]) -> tuple[list[bytes | None], list[int]]:
    """Each value in PostgreSQL's text format, typed as psycopg binds it."""
    out: list[bytes | None] = []
    types: list[int] = []
    put, typed = out.append, types.append  # this runs for every value of every row
    for value in values:
        kind = type(value)
        if kind is str:
            if "\x00" in value:
                value = _nul_free(value)
            put(value.encode(encoding))
            typed(0)  # unknown, as psycopg sends a str: the statement types it
        elif value is None:
            put(None)
            typed(0)
        elif kind is int:
            put(b"%d" % value)
            typed(_INT2 if -32768 <= value <= 32767 else _INT4
                  if -2**31 <= value < 2**31 else _INT8
                  if -2**63 <= value < 2**63 else _NUMERIC)
        elif kind is UUID:
            put(id_text(value).encode())
            typed(_UUID)
        elif kind is datetime and value.tzinfo is UTC:
            text = _TIMES.get(value)
            if text is None:  # an event's time, written by several views: formatted once
                if len(_TIMES) >= 1024:
                    _TIMES.clear()
                text = _TIMES[value] = value.isoformat().encode()
            put(text)
            typed(_TIMESTAMPTZ)
        elif kind is datetime and value.tzinfo is not None:
            put(value.isoformat().encode())
            typed(_TIMESTAMPTZ)
        elif kind is Json:
            put((value.dumps or _json_text)(value.obj).encode(encoding))
            typed(_JSON)
        elif kind is bool:
            put(b"t" if value else b"f")
            typed(_BOOL)
        else:  # what psycopg's own text dumper gives
            dumper = Transformer(conn).get_dumper(value, PyFormat.TEXT)
            dumped = dumper.dump(_nul_free(value) if isinstance(value, str) else value)
            put(None if dumped is None else bytes(dumped))
            typed(dumper.oid)
    return out, types


# isoformat formats through sprintf: 13,000 instructions a time, a third of a row's encoding.
# Only times in UTC (an event's), keyed by the time: equal times in other offsets differ in text.
_TIMES: dict[datetime, bytes] = {}
# What json.dumps writes with its defaults, from C's encoder made once: json.dumps built
# one in Python for every call, which cost more than the encoding (19,000 instructions).
_dumps = c_json_encoder(ensure_ascii=True, separators=(", ", ": "), allow_nan=True)


def _json_text(value: Any) -> str:
    """`json.dumps(value)`."""
    if _dumps is None:
        return json.dumps(value)
    try:
        return "".join(_dumps(value, 0))
    except RecursionError:  # no circular check here: json.dumps names the cycle
        return json.dumps(value)


_INT2, _INT4, _INT8, _NUMERIC = (postgres_types.get_oid(n)
                                 for n in ("int2", "int4", "int8", "numeric"))
_UUID, _TIMESTAMPTZ, _JSON, _BOOL = (postgres_types.get_oid(n)
                                     for n in ("uuid", "timestamptz", "json", "bool"))


def _nul_free(text: str) -> str:
    """PostgreSQL text cannot hold NUL; a model may still send one (shown as U+FFFD)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def postgres_views(
    datastore: PostgresDatastore, application_name: str,
    read_models: Iterable[ReadModel], *, prefix: str | None = None,
) -> list[SqlView]:
    """The views of `read_models` (the wiring's registry) in the store, created if missing;
    tables are named `<prefix>_<view>` (the application's name by default)."""
    prefix = prefix or application_name.lower()
    return [m.open(PostgresViewStore(datastore, m.view, prefix=prefix,
                                     application_name=application_name))
            for m in read_models]


class AppendWaker:
    """Blocks until the event recorder NOTIFYs an append, or a timeout passes; keeps the
    newest notification id the appends announced (their payload) for the next pass.

    LISTEN starts before the first catch-up, so an append committed between a pass and
    the next wait is still queued on the connection and wakes it at once.
    """

    def __init__(self, recorder: PostgresApplicationRecorder) -> None:
        self._stack = ExitStack()
        self._conn = self._stack.enter_context(recorder.datastore.get_connection())
        self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(recorder.channel_name)))
        self._conn.commit()  # a LISTEN takes effect when its transaction commits
        self._head: int | None = None  # the newest id announced since the last `head`
        self._unknown = False  # an append announced no id (a recorder of before): read it

    @property
    def connection(self) -> Any:
        return self._conn

    def wait(self, timeout: float) -> None:
        """Return on the next append (those already queued included) or after `timeout`."""
        try:
            for notify in self._conn.notifies(timeout=timeout, stop_after=1):
                self._heard(notify.payload)
        except UnicodeDecodeError:  # a payload the connection's encoding cannot read
            self._unknown = True
        self._drain()

    def head(self) -> int | None:
        """The newest notification id announced since the last call, appends queued now
        included; None when an append announced none, or none was heard (read the log's)."""
        self._drain()
        head, unknown, self._head, self._unknown = self._head, self._unknown, None, False
        return None if unknown else head

    def _drain(self) -> None:
        while True:  # appends since then: one pass for all
            try:
                for notify in self._conn.notifies(timeout=0):
                    self._heard(notify.payload)
                return
            except UnicodeDecodeError:  # psycopg decodes as it reads (a SQL_ASCII database
                self._unknown = True    # takes any byte): that one is gone, read the rest

    def _heard(self, payload: str) -> None:
        """Any session may NOTIFY on the channel (another store's schema shares it): only
        an id's plain decimal digits count, and the pass trusts it only as far as this
        process's own commits reach (`ReadEngine.catch_up`)."""
        if not (0 < len(payload) <= 19 and payload.isascii() and payload.isdigit()):
            self._unknown = True
        elif self._head is None or int(payload) > self._head:
            self._head = int(payload)

    def discard(self) -> None:
        """Forget what was heard, the appends queued included (a follower's: they would
        pile up on the connection unread)."""
        self._drain()
        self._head, self._unknown = None, False

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
            self.leading = bool(row and row["leading"])
            if not self.leading:
                self._waker.discard()  # a follower applies nothing of what it hears
        except (psycopg.Error, PersistenceError, UnavailableError, UnicodeDecodeError) as exc:
            raise LeaderLostError(exc) from exc  # (a NOTIFY heard during the query it cannot
            # decode: its connection is dropped, and the election is run again)
        return self.leading

    def wait(self, timeout: float) -> None:
        """Until the next append of any process (or `timeout`)."""
        assert self._waker is not None, "lead first"
        try:
            self._waker.wait(timeout)
        except (psycopg.Error, PersistenceError, UnavailableError) as exc:
            raise LeaderLostError(exc) from exc

    def head(self) -> int | None:
        """The log's head as the appends heard since the last call announced it (None:
        read it; the connection's failure shows at the next `wait`)."""
        if self._waker is None:
            return None
        try:
            return self._waker.head()
        except (psycopg.Error, PersistenceError, UnavailableError):
            return None

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
