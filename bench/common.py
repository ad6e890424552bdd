"""What the benchmarks share: a throwaway PostgreSQL schema, rows written straight into views."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import psycopg
from psycopg import sql

if TYPE_CHECKING:
    from interlock.projections.engine.sql import SqlView
    from interlock.projections.readmodels import SqlReadModels

PG_URL = os.environ.get(
    "INTERLOCK_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/interlock_test"
)


@contextmanager
def scratch_schema() -> Iterator[str]:
    """A store URL in a new schema, dropped afterwards."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        conn = psycopg.connect(PG_URL, autocommit=True)
    except psycopg.OperationalError as exc:
        raise SystemExit(f"benchmarks need PostgreSQL at {PG_URL} (INTERLOCK_BENCH_POSTGRES;"
                         f" `bash .ci/run` creates interlock_test): {exc}") from None
    with conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield f"{PG_URL}?schema={schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def bulk_fill(models: SqlReadModels,
              fills: list[tuple[type[SqlView], str, str, dict[str, Any]]]) -> None:
    """Each (view, table, INSERT ... SELECT, params) in one transaction, then ANALYZE the
    tables: rows seeded past the projections, for queries over millions of them."""
    from interlock.projections.backends.postgres import PostgresViewStore

    stores = [cast(PostgresViewStore, models.view(view).store) for view, _, _, _ in fills]
    with stores[0].datastore.transaction(commit=True) as curs:
        for store, (_, _, statement, params) in zip(stores, fills, strict=True):
            curs.execute(store._q(statement), params)
    with stores[0].datastore.get_connection() as conn:
        for store, (_, table, _, _) in zip(stores, fills, strict=True):
            conn.execute(store._q(f"ANALYZE {{{table}}}"))
