"""What the benchmarks share: a throwaway PostgreSQL schema."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

PG_URL = os.environ.get(
    "INTERLOCK_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/interlock_test"
)


@contextmanager
def scratch_schema() -> Iterator[str]:
    """A store URL in a new schema, dropped afterwards."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield f"{PG_URL}?schema={schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
