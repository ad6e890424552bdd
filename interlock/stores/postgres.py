"""A PostgreSQL application recorder that appends in one round trip, many chats at a time.

The stock recorder pipelines LOCK, NOTIFY and INSERT, then commits: two round trips, one
transaction and one fsync per save, one save at a time under the table lock. Here a
server-side function does the same steps (the lock is kept, so notification ids still commit
in order for subscribers) for every append waiting in this process (group commit), called
in autocommit with plain arrays; each chat's version check still holds on its own.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, cast
from uuid import UUID

import psycopg
from eventsourcing.application import Application
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    Notification,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.postgres import (
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresFactory,
    TPostgresTrackingRecorder,
)
from eventsourcing.utils import Environment, EnvType, retry
from psycopg import Connection, pq
from psycopg.conninfo import conninfo_to_dict
from psycopg.errors import ReadOnlySqlTransaction
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier, Literal
from psycopg.types.composite import register_composite
from psycopg_pool import PoolTimeout

from interlock.domain.chat.ids import id_text
from interlock.domain.errors import StoreUnavailableError
from interlock.stores import libpq
from interlock.stores.groupcommit import Append, GroupCommit, conflict
from interlock.stores.guard import DEFAULT_DEADLINE, READ_ONLY, StoreGuard
from interlock.stores.pgarrays import Blobs, Int4s, Int8s, Texts, Uuids, packed
from interlock.stores.urls import STORE_CONNINFO

STORE_DEADLINE = "STORE_DEADLINE"  # the setting (seconds) in the store's environment
PURGE_EVERY = 0.5  # seconds: a restart breaks every pooled connection at once; purge once
# The connection last given back waits in a slot for the next lending (of any thread): a
# lone command's eight lendings a cycle skip the pool's getconn and putconn. One idle in the
# slot longer than PARKED_IDLE, or lent from it for longer than PARKED_ROUND since it last
# left the pool, goes back to the pool, whose checks (lifetime, idleness) then apply.
PARKED_IDLE, PARKED_ROUND = 5.0, 60.0


class InterlockPostgresRecorder(PostgresApplicationRecorder):
    """Appends concurrent chats' events together with one call to `<table>_append_groups`.

    The function takes the table lock (so notification ids commit in order), finds the
    groups (one per caller) that would conflict with a stored event and inserts the others;
    it returns the refused groups, then the new notification ids in the order of the events
    given. Nothing of a refused group is written. One transaction, one fsync, many chats.
    Its NOTIFY carries the newest id inserted: the log's head as of its commit, which the
    views' leader then need not read (`ViewLeader.head`).
    """

    append_guards = True  # `insert_events(..., guards=...)` refuses the events by them

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        function = f"{events_table_name}_append_groups"
        self.check_identifier_length(function)
        names = {
            "schema": Identifier(self.datastore.schema),
            "table": Identifier(self.events_table_name),
            "fn": Identifier(function),
            "channel_text": Literal(self.channel_name),
            "id_type": Identifier(self.datastore.originator_id_type),
        }
        self.sql_create_statements.append(SQL(APPEND_GROUPS).format(**names))
        self.append_statement = SQL("SELECT * FROM {schema}.{fn}($1, $2, $3, $4, $5)").format(
            **names
        ).as_bytes(None)  # rendered once, not per call; sent through libpq (stores.libpq)
        self.select_mine_statement = SQL(
            "SELECT originator_id, originator_version, state, notification_id"
            " FROM {schema}.{table} WHERE originator_id = ANY(%b) AND originator_version = ANY(%b)"
        ).format(**names).as_bytes(None)
        self.select_many_statement = SQL(
            "SELECT originator_id, originator_version, topic, state FROM {schema}.{table}"
            " WHERE originator_id = ANY(%b) ORDER BY originator_id, originator_version"
        ).format(**names).as_bytes(None)
        self.max_id_statement = self.max_notification_id_statement.as_bytes(None)
        self.group_commit = GroupCommit(self._flush)
        self._names = names
        self._select_events_sql: dict[tuple[bool, ...], bytes] = {}
        self._select_notifications_sql: dict[tuple[bool, ...], bytes] = {}
        self._uuid_ids = self.datastore.originator_id_type == "uuid"
        self.new_keys: NewKeys | None = None  # set by `write_keys_in`
        self.keyed_statement = b""

    def write_keys_in(self, table: Identifier) -> NewKeys:
        """Write each new chat's personal-data key into `table` in the transaction of the
        chat's first events (`NewKeys`), not in a round trip of its own before them."""
        if self.new_keys is None:
            function = f"{self.events_table_name}_append_keyed"
            self.check_identifier_length(function)
            names = {**self._names, "keyed": Identifier(function), "keys": table,
                     "fn": Identifier(f"{self.events_table_name}_append_groups")}
            with schema_lock(self.datastore), self.datastore.transaction(commit=True) as curs:
                curs.execute(SQL(APPEND_KEYED).format(**names))
            self.keyed_statement = SQL(
                "SELECT * FROM {schema}.{keyed}($1, $2, $3, $4, $5, $6, $7, $8)"
            ).format(**names).as_bytes(None)
            self.new_keys = NewKeys()
        return self.new_keys

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_events(
        self, originator_id: UUID | str, *, gt: int | None = None, lte: int | None = None,
        desc: bool = False, limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """The library's query, whose text it composes and psycopg renders on every call
        (each load of a chat): here rendered once per shape. Rows come in binary, so the
        stored bytes are not unescaped from bytea's text form (what reading them cost most)."""
        shape = (gt is not None, lte is not None, desc, limit is not None)
        statement = self._select_events_sql.get(shape)
        if statement is None:
            text, n = ("SELECT originator_id, originator_version, topic, state"
                       " FROM {schema}.{table} WHERE originator_id = $1"), 1
            for given, condition in zip(shape, (" AND originator_version > $%d",
                                                " AND originator_version <= $%d"), strict=False):
                if given:
                    n += 1
                    text += condition % n
            text += " ORDER BY originator_version DESC" if desc else \
                " ORDER BY originator_version ASC"
            if limit is not None:
                text += f" LIMIT ${n + 1}"
            statement = self._select_events_sql[shape] = SQL(text).format(
                **self._names).as_bytes(None)
        params = [id_text(originator_id).encode(),
                  *(b"%d" % v for v in (gt, lte, limit) if v is not None)]
        types = [_UUID if self._uuid_ids else _TEXT, *[_INT8] * (len(params) - 1)]
        with self.datastore.get_connection() as conn:
            result = libpq.run(conn, statement, params, types,
                               binary_rows=True)
        uuid_ids = self._uuid_ids
        get = cast(Callable[[int, int], bytes], result.get_value)  # no column is NULL
        return [StoredEvent(
            originator_id=UUID(bytes=bytes(get(i, 0))) if uuid_ids else bytes(get(i, 0)).decode(),
            originator_version=int.from_bytes(get(i, 1), "big", signed=True),
            topic=bytes(get(i, 2)).decode(), state=bytes(get(i, 3)))
            for i in range(result.ntuples)]

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def max_notification_id(self) -> int | None:
        """The library's query (every views pass asks it), rendered once, sent through
        libpq."""
        statement = self.max_id_statement
        with self.datastore.get_connection() as conn:
            value = libpq.run(conn, statement, [], []).get_value(0, 0)
        return None if value is None else int(value)

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_notifications(
        self, start: int | None, limit: int, stop: int | None = None,
        topics: Sequence[str] = (), *, inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """The library's query (the views read it every pass), rendered once per shape."""
        shape = (start is not None, inclusive_of_start, stop is not None, bool(topics))
        statement = self._select_notifications_sql.get(shape)
        if statement is None:
            conditions = []
            if start is not None:
                conditions.append("notification_id>=%s" if inclusive_of_start
                                  else "notification_id>%s")
            if stop is not None:
                conditions.append("notification_id <= %s")
            if topics:
                conditions.append("topic = ANY(%s)")
            where = (" WHERE " + " AND ".join(conditions)) if conditions else ""
            statement = self._select_notifications_sql[shape] = SQL(
                "SELECT * FROM {schema}.{table}" + where + " ORDER BY notification_id LIMIT %s"
            ).format(**self._names).as_bytes(None)
        params: list[Any] = [v for v in (start, stop) if v is not None]
        if topics:
            params.append(list(topics))
        params.append(limit)
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(statement, params, prepare=True, binary=True)
            return [Notification(id=row["notification_id"],
                                 originator_id=row["originator_id"],
                                 originator_version=row["originator_version"],
                                 topic=row["topic"], state=bytes(row["state"]))
                    for row in curs.fetchall()]

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_events_of(self, originator_ids: Sequence[UUID]) -> dict[UUID, list[StoredEvent]]:
        """Every event of these chats in one query, each chat's in version order."""
        found: dict[UUID, list[StoredEvent]] = {}
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self.select_many_statement, (list(originator_ids),), prepare=True)
            for row in curs.fetchall():
                found.setdefault(row["originator_id"], []).append(StoredEvent(
                    originator_id=row["originator_id"],
                    originator_version=row["originator_version"],
                    topic=row["topic"], state=bytes(row["state"])))
        return found

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int]:
        """`guards`: (stream, version) pairs; the events are refused (a conflict) if one of
        those streams holds an event at that version when they would commit."""
        if not stored_events:
            return []
        return self.group_commit.submit(stored_events, kwargs.get("guards", ()))

    def _flush(self, batch: list[Append]) -> None:
        """One group commit; the store failing it past the retries is unavailable (a 503 for
        every caller of the batch), not a bug: nothing of the batch was written."""
        try:
            self._flush_retrying(batch)
        except (InterfaceError, OperationalError) as exc:
            retry_after = getattr(getattr(self.datastore, "guard", None), "retry_after", 1)
            raise StoreUnavailableError(
                f"the append failed: {type(exc.__cause__ or exc).__name__}",
                retry_after=retry_after) from exc

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def _flush_retrying(self, batch: list[Append]) -> None:
        again = any(append.sent for append in batch)
        for append in batch:
            append.sent = True
        events = [(n, e) for n, append in enumerate(batch) for e in append.events]
        # a guard goes as a row with no topic: checked like an event, never inserted
        rows = events + [(n, StoredEvent(originator_id=stream, originator_version=version,
                                         topic="", state=b""))
                         for n, append in enumerate(batch) for stream, version in append.guards]
        chats = [e.originator_id for _, e in rows]
        arrays: list[list[Any]] = [
            Uuids(chats) if self._uuid_ids else Texts(map(str, chats)),  # type: ignore[arg-type]
            Int8s(e.originator_version for _, e in rows),
            Texts(e.topic for _, e in rows),
            Blobs(e.state for _, e in rows),
            Int4s(n for n, _ in rows),
        ]
        keys = self.new_keys.of(events) if self.new_keys is not None else []
        statement = self.append_statement
        if keys:  # new chats: their keys go in the same transaction, for accepted groups
            statement = self.keyed_statement
            arrays += [Texts(id_text(c) for c, _, _ in keys), Blobs(k for _, k, _ in keys),
                       Int4s(n for _, _, n in keys)]
        types, values = zip(*map(packed, arrays), strict=True)
        with self.datastore.get_connection() as conn:
            result = libpq.run(conn, statement, values, types, binary=True)
        get = result.get_value  # rows (grp, nid): a refused group, or an inserted id
        refused = {int(get(i, 0) or b"") for i in range(result.ntuples) if get(i, 1) is None}
        inserted = iter(int(nid) for i in range(result.ntuples)
                        if (nid := get(i, 1)) is not None)
        for n, append in enumerate(batch):  # ids come in the order the events were given
            if n not in refused:
                append.ids = [next(inserted) for _ in append.events]
            elif again and (ids := self._committed_before(append)) is not None:
                append.ids = ids  # the lost attempt had committed it: ours, not a conflict
                refused.discard(n)
            else:
                append.error = conflict(append)
        if self.new_keys is not None:
            for chat_id, _, n in keys:
                self.new_keys.settled(chat_id, written=n not in refused)

    def _committed_before(self, append: Append) -> list[int] | None:
        """The notification ids of `append`'s events if the store holds exactly them (an
        earlier attempt committed, its answer lost with its connection), else None."""
        events = append.events
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self.select_mine_statement, (
                list({e.originator_id for e in events}),
                list({e.originator_version for e in events})))
            stored = {(r["originator_id"], r["originator_version"]): r for r in curs.fetchall()}
        found = [stored.get((e.originator_id, e.originator_version)) for e in events]
        if any(r is None or bytes(r["state"]) != e.state for r, e in zip(found, events,
                                                                        strict=True)):
            return None
        return [int(r["notification_id"]) for r in found if r is not None]

# psycopg's errors as the library's `get_connection` turns them into its own, first match.
_LIBRARY_ERRORS: tuple[tuple[type[psycopg.Error], type[PersistenceError]], ...] = (
    (psycopg.InterfaceError, InterfaceError), (psycopg.OperationalError, OperationalError),
    (psycopg.DataError, DataError), (psycopg.IntegrityError, IntegrityError),
    (psycopg.InternalError, InternalError), (psycopg.ProgrammingError, ProgrammingError),
    (psycopg.NotSupportedError, NotSupportedError), (psycopg.DatabaseError, DatabaseError),
    (psycopg.Error, PersistenceError))


def _waited_for(pool: Any) -> bool:
    """Whether callers queue for one of `pool`'s connections (unknown: assume so)."""
    waiting = getattr(pool, "_waiting", None)  # psycopg_pool's queue of waiting clients
    return waiting is None or len(waiting) > 0


def _idle(conn: Connection[Any]) -> bool:
    """Open, healthy and outside any transaction: fit to be lent as the pool would."""
    pg = conn.pgconn
    return not conn.closed and pg.status == pq.ConnStatus.OK and \
        pg.transaction_status == pq.TransactionStatus.IDLE


def _roll_back(conn: Connection[Any]) -> None:
    """Roll back a connection whose user failed; a connection too broken to roll back is
    left to the pool, which replaces it (psycopg's `Connection.__exit__` likewise)."""
    if conn.closed:
        return
    try:
        conn.rollback()
    except psycopg.Error as exc:
        logging.getLogger(__name__).warning("error ignored in rollback on %s: %s", conn, exc)


def _library_error(exc: psycopg.Error) -> PersistenceError:
    return next(ours(str(exc)) for theirs, ours in _LIBRARY_ERRORS if isinstance(exc, theirs))


_UUID, _TEXT, _INT8 = 2950, 25, 20  # the parameters' type oids


APPEND_GROUPS = """
CREATE OR REPLACE FUNCTION {schema}.{fn}(
    ids {id_type}[], versions bigint[], topics text[], states bytea[], groups int[]
) RETURNS TABLE (grp int, nid bigint) LANGUAGE plpgsql AS $$
DECLARE refused int[];
BEGIN
    LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE;
    SELECT coalesce(array_agg(DISTINCT u.g), ARRAY[]::int[]) INTO refused
      FROM unnest(ids, versions, groups) AS u(i, v, g)
      JOIN {schema}.{table} AS e ON e.originator_id = u.i AND e.originator_version = u.v;
    RETURN QUERY SELECT r, NULL::bigint FROM unnest(refused) AS r;
    RETURN QUERY WITH ins AS (
        INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state)
        SELECT u.i, u.v, u.t, u.s
          FROM unnest(ids, versions, topics, states, groups) WITH ORDINALITY AS u(i, v, t, s, g, n)
         WHERE NOT u.g = ANY(refused) AND u.t <> ''
         ORDER BY u.n
        RETURNING notification_id
    ) SELECT NULL::int, ins.notification_id FROM ins ORDER BY 2;
    IF FOUND THEN  -- the newest id, the log's head once this commits (ids commit in order)
        PERFORM pg_notify({channel_text}, lastval()::text);
    END IF;
END $$
"""


APPEND_KEYED = """
CREATE OR REPLACE FUNCTION {schema}.{keyed}(
    ids {id_type}[], versions bigint[], topics text[], states bytea[], groups int[],
    key_ids text[], keys bytea[], key_groups int[]
) RETURNS TABLE (grp int, nid bigint) LANGUAGE plpgsql AS $$
DECLARE r record; refused int[] := ARRAY[]::int[];
BEGIN
    FOR r IN SELECT * FROM {schema}.{fn}(ids, versions, topics, states, groups) LOOP
        IF r.nid IS NULL THEN refused := refused || r.grp; END IF;
        grp := r.grp; nid := r.nid;
        RETURN NEXT;
    END LOOP;
    INSERT INTO {keys} (chat_id, key)
    SELECT k.i, k.k FROM unnest(key_ids, keys, key_groups) AS k(i, k, g)
     WHERE NOT k.g = ANY(refused)
    ON CONFLICT (chat_id) DO NOTHING;
END $$
"""

KEPT_NEW_KEYS = 4096  # keys of chats whose first events were never committed: dropped


class NewKeys:
    """Keys of new chats, kept until the append of the chat's first event writes them.

    The append writes a key only if the chat's group is accepted, in the same transaction:
    a refused or failed group leaves no key behind, and no chat exists without its key.
    A refused chat's key is forgotten by whoever cached it (`refused` listeners).
    """

    def __init__(self) -> None:
        self._keys: dict[UUID | str, bytes] = {}  # by chat id (StoredEvent's type)
        self._lock = threading.Lock()
        self.refused: list[Callable[[UUID | str], None]] = []

    def put(self, chat_id: UUID, key: bytes) -> bytes:
        """Keep `key` for the chat (the one kept already, if any); the key it will have."""
        with self._lock:
            if chat_id not in self._keys and len(self._keys) >= KEPT_NEW_KEYS:
                del self._keys[next(iter(self._keys))]
            return self._keys.setdefault(chat_id, key)

    def of(self, events: Sequence[tuple[int, StoredEvent]]
           ) -> list[tuple[UUID | str, bytes, int]]:
        """(chat, key, group) for each chat whose first event is among `events`."""
        with self._lock:
            return [(e.originator_id, key, n) for n, e in events if e.originator_version == 1
                    and (key := self._keys.get(e.originator_id)) is not None]

    def settled(self, chat_id: UUID | str, *, written: bool) -> None:
        with self._lock:
            self._keys.pop(chat_id, None)
        if not written:
            for listener in self.refused:
                listener(chat_id)


@contextmanager
def schema_lock(datastore: PostgresDatastore) -> Iterator[None]:
    """Hold a session advisory lock while tables, types and functions are created.

    Processes starting together on a fresh schema otherwise race on CREATE TYPE and
    CREATE TABLE (a unique violation in pg_type) and on CREATE OR REPLACE FUNCTION.
    """
    key = f"interlock-ddl:{datastore.schema}"
    with datastore.get_connection() as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))


class GuardedDatastore(PostgresDatastore):
    """The library's datastore, bounded: a call fails at once while the store is down (its
    StoreGuard), waits at most the deadline for a connection, and a connection found broken
    purges the pool of the others a restart broke with it, so the library's retry gets a
    fresh connection, not the next broken one. When the guard finds the store down, the
    connections in use are cut (their sockets shut down): a call waiting on a server that no
    longer answers (frozen, or its host gone) fails now instead of when TCP gives up."""

    guard: StoreGuard
    _purged: float
    _in_use: set[Connection[DictRow]]
    _in_use_lock: threading.Lock
    # the parked connection, its pool, when it was parked, and when it last left the pool
    _parked: tuple[Connection[DictRow], Any, float, float] | None

    @classmethod
    def adopt(cls, datastore: PostgresDatastore, deadline: float,
              conninfo: str | None = None) -> GuardedDatastore:
        """`datastore` (built by the library from the environment) with these bounds; its
        connections made from `conninfo` (libpq's reading of the store URL: several hosts,
        target_session_attrs, ...) rather than the library's five settings, when given."""
        datastore.__class__ = cls  # the library builds it in its factory: same state, our calls
        assert isinstance(datastore, GuardedDatastore)
        pool = datastore.pool
        pool.timeout = deadline  # the wait for a pooled connection
        pool.reconnect_timeout = max(deadline, 1.0)  # then a slot is freed; grown on demand
        assert isinstance(pool.kwargs, dict)
        given = pool.kwargs if conninfo is None else conninfo_to_dict(conninfo)
        pool.kwargs = {  # the URL's own values win over these bounds
            "row_factory": pool.kwargs["row_factory"],
            "connect_timeout": max(2, math.ceil(deadline)),
            "keepalives_idle": max(1, math.ceil(deadline)), "keepalives_interval": 1,
            "keepalives_count": 3, "tcp_user_timeout": int(deadline * 1000),
            # Our hot statements are prepared by us, once a session (`libpq`). psycopg's own
            # preparing would, at every rollback, DEALLOCATE ALL of a session's statements,
            # ours too: a views' pass then failed on a statement gone under it.
            "prepare_threshold": None,
            **{k: v for k, v in given.items() if k != "row_factory"}}
        datastore.guard = StoreGuard(datastore.probe_connection, deadline=deadline)
        datastore.guard.listeners.append(datastore._store_changed)
        datastore._purged = 0.0
        datastore._in_use, datastore._in_use_lock = set(), threading.Lock()
        datastore._parked = None
        return datastore

    def probe_connection(self, timeout: float) -> Connection[Any]:
        """A connection of its own for the guard's probes (never one of the pool's)."""
        assert isinstance(self.pool.kwargs, dict)
        params = {k: v for k, v in self.pool.kwargs.items() if k != "row_factory"}
        if self.pool.get_password_func is not None:
            params["password"] = self.pool.get_password_func()
        params["connect_timeout"] = max(2, math.ceil(timeout))
        return psycopg.connect(autocommit=True, **params)

    @contextmanager
    def get_connection(self) -> Iterator[Connection[DictRow]]:
        """A pooled connection, as the library's `get_connection` lends it (its errors turned
        into the library's), counted in use for the guard, which refuses it while the store
        is down. One generator doing what the library's, the pool's and the guard's context
        managers did nested: they cost 100 k instructions a call, and a cycle makes eight."""
        self.guard.admit()
        try:
            try:
                conn, pool, left_pool = self._unpark()
                if conn is None:
                    pool = self.pool
                    if pool.closed:  # not opened yet (a closed pool refuses to open again)
                        pool.open(self.pool_open_timeout is not None,
                                  self.pool_open_timeout or 30.0)
                    conn, left_pool = pool.getconn(), time.monotonic()
                for info in self.psycopg_type_adapters.values():
                    if not conn.adapters.types.get(info.oid):
                        register_composite(info, conn)
                try:
                    with self._in_use_lock:
                        self._in_use.add(conn)
                    try:
                        yield conn
                    except ReadOnlySqlTransaction:
                        conn.close()  # a read-only server's session: the pool replaces it
                        raise
                    except BaseException:
                        _roll_back(conn)  # as the pool's `with conn:` does
                        raise
                    if not conn.closed and \
                            conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
                        conn.commit()  # what the pool's `with conn:` does (idle: nothing)
                finally:
                    with self._in_use_lock:
                        self._in_use.discard(conn)
                    if not self._park(conn, pool, left_pool):
                        pool.putconn(conn)
            except ReadOnlySqlTransaction as exc:
                raise self._read_only(exc) from exc
            except psycopg.Error as exc:
                raise _library_error(exc) from exc
        except (OperationalError, InterfaceError) as exc:
            if isinstance(exc.__cause__, PoolTimeout):
                raise self.guard.refuse(f"no connection within {self.pool.timeout:g}s") from exc
            self._broken()
            raise  # the library's retry tries again: a fresh connection, or a refusal

    def _unpark(self) -> tuple[Connection[DictRow] | None, Any, float]:
        """The parked connection, its pool and when it left the pool, if one waits and is
        fresh."""
        if self._parked is None:
            return None, None, 0.0
        with self._in_use_lock:
            parked, self._parked = self._parked, None
        if parked is None:
            return None, None, 0.0
        conn, pool, since, left_pool = parked
        if pool is not self.pool or time.monotonic() - since > PARKED_IDLE or not _idle(conn):
            pool.putconn(conn)  # its pool checks it, keeps or replaces it (closed: closes it)
            return None, None, 0.0
        return conn, pool, left_pool

    def _park(self, conn: Connection[DictRow], pool: Any, left_pool: float) -> bool:
        """Keep `conn`, lent from `pool`, for the next lending if it is healthy, idle, its
        pool is still the datastore's, nobody waits for that pool (the pool hands it to the
        first in line) and the slot is free; False: its pool takes it back."""
        now = time.monotonic()
        if (self._parked is not None or now - left_pool > PARKED_ROUND or not _idle(conn)
                or pool is not self.pool or pool.closed or not self.guard.up
                or _waited_for(pool)
                or getattr(pool, "_check", None) is not None):  # pre-ping: the pool's
            return False
        with self._in_use_lock:
            if self._parked is not None:
                return False
            self._parked = (conn, pool, now, left_pool)
        if _waited_for(pool) or pool.closed:  # someone queued (or it closed) meanwhile
            self._give_back_parked()
        return True

    def _give_back_parked(self) -> None:
        with self._in_use_lock:
            parked, self._parked = self._parked, None
        if parked is not None:
            parked[1].putconn(parked[0])

    def close(self) -> None:
        with suppress(psycopg.Error):
            self._give_back_parked()  # the pool closes it with the others
        super().close()

    def _read_only(self, exc: ReadOnlySqlTransaction) -> StoreUnavailableError:
        """A write met a read-only server (a standby, a demoted primary): unavailable, not a
        bug. The pool's sessions, made before, are dropped at once (once per PURGE_EVERY):
        new ones go where the URL says, to the primary when it names several hosts with
        `target_session_attrs=read-write`."""
        now = time.monotonic()
        if now - self._purged >= PURGE_EVERY:
            self._purged = now
            with suppress(psycopg.Error):
                self._give_back_parked()
                self.pool.drain()
        said = " ".join(str(exc).split())
        return self.guard.refuse(f"{READ_ONLY} ({said})")

    def _store_changed(self, up: bool) -> None:
        """The guard found the store down: cut the connections in use, whose calls would
        otherwise wait for a server that may never answer them; a read-only store's idle
        sessions are dropped too. Back up: refill the pool now (its reconnection attempts
        may be waiting out a backoff), so the first requests do not wait for it; after a
        read-only spell, with new sessions (the old ones may still be read-only)."""
        if up:
            with suppress(psycopg.Error):
                self._give_back_parked()  # checked with the others
                if self.guard.read_only_seen:
                    self.pool.drain()
                else:
                    self.pool.check()
            return
        if self.guard.read_only:
            with suppress(psycopg.Error):
                self._give_back_parked()
                self.pool.drain()
        with suppress(psycopg.Error):
            self._give_back_parked()  # idle: the pool drops it when it is found broken
        with self._in_use_lock:
            using = list(self._in_use)
        for conn in using:
            # A duplicate of the descriptor: shutting it down ends the connection for its
            # user (who gets an OperationalError); closing the duplicate leaves theirs open.
            with suppress(psycopg.Error, OSError), \
                    socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
                sock.shutdown(socket.SHUT_RDWR)

    def _broken(self) -> None:
        """A connection failed in use: probe the store, and drop the pool's broken ones
        (not while it is down: pinging a frozen server's connections would hang)."""
        self.guard.suspect()
        with suppress(psycopg.Error):
            self._give_back_parked()  # the restart that broke this one broke it too
        now = time.monotonic()
        if self.guard.up and now - self._purged >= PURGE_EVERY:
            self._purged = now
            self.pool.check()


class InterlockPostgresFactory(PostgresFactory):
    """The library's factory with the one-round-trip recorder, serialised DDL, and a
    datastore bounded by the store deadline (GuardedDatastore)."""

    application_recorder_class = InterlockPostgresRecorder

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        deadline = float(self.env.get(STORE_DEADLINE) or DEFAULT_DEADLINE)
        self.datastore = GuardedDatastore.adopt(self.datastore, deadline,
                                                self.env.get(STORE_CONNINFO))
        self.datastore.guard.first_contact()

    def application_recorder(self) -> ApplicationRecorder:
        with schema_lock(self.datastore):
            return super().application_recorder()

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        with schema_lock(self.datastore):
            return super().aggregate_recorder(purpose)

    def tracking_recorder(
        self, tracking_recorder_class: type[TPostgresTrackingRecorder] | None = None
    ) -> TPostgresTrackingRecorder:
        with schema_lock(self.datastore):
            return super().tracking_recorder(tracking_recorder_class)


def store_guard(app: Application[Any]) -> StoreGuard | None:
    """The guard of the app's PostgreSQL store; None for the other stores."""
    datastore = getattr(app.recorder, "datastore", None)
    return datastore.guard if isinstance(datastore, GuardedDatastore) else None
