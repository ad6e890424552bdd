"""The store's hot statements sent straight through libpq, each prepared once a connection.

psycopg's cursor adapts every parameter and loads every value in Python: measured here
with callgrind, about 490 k instructions for a statement that costs libpq, the socket and
the packing of its parameters about 180 k. An append and a chat's load run four and two
times a banking cycle with fixed shapes, so their parameters are packed and their rows read
here (`interlock.stores.pgarrays`, `InterlockPostgresRecorder`). Errors are psycopg's own,
raised inside the datastore's `get_connection`, which turns them into the library's.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from psycopg import pq
from psycopg.generators import execute as _execute

_PREPARED: WeakKeyDictionary[Any, set[bytes]] = WeakKeyDictionary()  # names, by PGconn


def run(conn: psycopg.Connection[Any], query: bytes, params: Sequence[bytes | None],
        types: Sequence[int], *, binary: bool = False,
        binary_rows: bool = False) -> pq.abc.PGresult:
    """`query` (placeholders `$n`, parameter types `types`) prepared on this connection if
    it is not yet (as `name_of(query)`), then executed with `params` (binary when
    `binary`, else text); its result, rows binary when `binary_rows`. The connection must
    be idle in autocommit: the statement commits on its own."""
    pg, name = conn.pgconn, name_of(query)
    with conn.lock:
        if conn.closed or pg.status == pq.ConnStatus.BAD:
            raise psycopg.OperationalError("the connection is closed")  # as psycopg says it
        if pg.transaction_status != pq.TransactionStatus.IDLE or pg.pipeline_status:
            raise psycopg.ProgrammingError("a direct statement needs an idle connection")
        prepared = _PREPARED.setdefault(pg, set())
        for attempt in (1, 2):
            if name not in prepared:
                pg.send_prepare(name, query, param_types=types)
                made = conn.wait(_execute(pg))
                if _state(made) != EXISTS:  # there already (a prepare interrupted after
                    _checked(conn, made)     # it was sent): a name stands for its text
                prepared.add(name)
            pg.send_query_prepared(name, params, param_formats=[int(binary)] * len(params),
                                   result_format=int(binary_rows))
            results = conn.wait(_execute(pg))
            if attempt == 1 and _state(results) == GONE:  # DEALLOCATE, DISCARD: anew
                prepared.discard(name)
                continue
            return _checked(conn, results)
    raise AssertionError("unreachable")


@functools.cache
def name_of(query: bytes) -> bytes:
    """The prepared statement's name: one per text (a datastore's schema is in the text)."""
    return b"interlock_" + hashlib.sha256(query).hexdigest()[:24].encode()


@functools.lru_cache(maxsize=4096)
def typed_name(query: bytes, types: tuple[int, ...]) -> bytes:
    """The name of `query` prepared with these parameter types: a pipeline's statement
    binds each value's type (an integer's width), so one text may be prepared several ways."""
    return name_of(query + b"\0" + b",".join(b"%d" % t for t in types))


def prepared_on(pg: Any) -> set[bytes]:
    """The names prepared on this connection (here or by a pipeline that keeps them)."""
    return _PREPARED.setdefault(pg, set())


GONE, EXISTS = b"26000", b"42P05"  # no such prepared statement; one of that name exists


def _state(results: list[pq.abc.PGresult]) -> bytes | None:
    """The SQLSTATE of the first error among `results`, None if none failed."""
    return next((r.error_field(pq.DiagnosticField.SQLSTATE) for r in results
                 if r.status == pq.ExecStatus.FATAL_ERROR), None)


def _checked(conn: psycopg.Connection[Any], results: list[pq.abc.PGresult]) -> pq.abc.PGresult:
    for result in results:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
    return results[-1]
