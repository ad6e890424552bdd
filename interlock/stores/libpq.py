"""The store's hot statements sent straight through libpq, each prepared once a connection.

psycopg's cursor adapts every parameter and loads every value in Python: measured here
with callgrind, about 490 k instructions for a statement that costs libpq, the socket and
the packing of its parameters about 180 k. An append and a chat's load run four and two
times a banking cycle with fixed shapes, so their parameters are packed and their rows read
here (`interlock.stores.pgarrays`, `InterlockPostgresRecorder`). Errors are psycopg's own,
raised inside the datastore's `get_connection`, which turns them into the library's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from psycopg import pq
from psycopg.generators import execute as _execute

_PREPARED: WeakKeyDictionary[Any, set[bytes]] = WeakKeyDictionary()  # names, by PGconn


def run(conn: psycopg.Connection[Any], name: bytes, query: bytes,
        params: Sequence[bytes | None], types: Sequence[int], *, binary: bool = False,
        binary_rows: bool = False) -> pq.abc.PGresult:
    """`query` (placeholders `$n`, parameter types `types`) prepared as `name` on this
    connection if it is not yet, then executed with `params` (binary when `binary`, else
    text); its result, rows binary when `binary_rows`. The connection must be idle in
    autocommit: the statement commits on its own."""
    pg = conn.pgconn
    with conn.lock:
        if pg.transaction_status != pq.TransactionStatus.IDLE or pg.pipeline_status:
            raise psycopg.ProgrammingError("a direct statement needs an idle connection")
        prepared = _PREPARED.setdefault(pg, set())
        for attempt in (1, 2):
            if name not in prepared:
                pg.send_prepare(name, query, param_types=types)
                _checked(conn, conn.wait(_execute(pg)))
                prepared.add(name)
            pg.send_query_prepared(name, params, param_formats=[int(binary)] * len(params),
                                   result_format=int(binary_rows))
            results = conn.wait(_execute(pg))
            if attempt == 1 and _gone(results):  # DEALLOCATE, DISCARD: prepare it anew
                prepared.discard(name)
                continue
            return _checked(conn, results)
    raise AssertionError("unreachable")


def _gone(results: list[pq.abc.PGresult]) -> bool:
    return any(r.status == pq.ExecStatus.FATAL_ERROR
               and r.error_field(pq.DiagnosticField.SQLSTATE) == b"26000" for r in results)


def _checked(conn: psycopg.Connection[Any], results: list[pq.abc.PGresult]) -> pq.abc.PGresult:
    for result in results:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
    return results[-1]
