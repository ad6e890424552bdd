"""Shared fixtures: a fresh store per test, on SQLite and on PostgreSQL (and memory)."""

from __future__ import annotations

import io
import json
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from interlock.api.observability.logs import handler

PG_URL = os.environ.get(
    "INTERLOCK_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/interlock_test"
)


def pg_schema_url(schema: str) -> str:
    return f"{PG_URL}?schema={schema}"


@pytest.fixture
def pg_store() -> Iterator[str]:
    """A PostgreSQL store URL in a schema of its own, dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    # Every connection the test opens (pools, servers it starts) carries the schema's name,
    # so a pool a test forgot to close cannot hold its connections for the rest of the run.
    before = os.environ.get("PGAPPNAME")
    os.environ["PGAPPNAME"] = schema
    try:
        yield pg_schema_url(schema)
    finally:
        if before is None:
            os.environ.pop("PGAPPNAME", None)
        else:
            os.environ["PGAPPNAME"] = before
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()",
                (schema,),
            )
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for `pg_store` by name needs the server as much as a marked one."""
    for item in items:
        if "pg_store" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'interlock.db'}"


# The PostgreSQL parametrisation carries the `postgres` mark: `-m "not postgres"` runs with no
# server at all.
ON_POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)


@pytest.fixture(params=["sqlite", ON_POSTGRES])
def store(request: pytest.FixtureRequest) -> str:
    """Each behaviour test runs on SQLite and on PostgreSQL."""
    name = "pg_store" if request.param == "postgres" else "sqlite_store"
    return str(request.getfixturevalue(name))


@pytest.fixture(params=["memory", "sqlite", ON_POSTGRES])
def any_store(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    name = "pg_store" if request.param == "postgres" else "sqlite_store"
    return str(request.getfixturevalue(name))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Lines:
    """JSON log lines written while the fixture is active."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    def all(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def of(self, logger: str) -> list[dict[str, Any]]:
        return [line for line in self.all() if line["logger"] == logger]


@pytest.fixture
def json_logs() -> Iterator[Lines]:
    stream = io.StringIO()
    out = handler("json", stream)
    logger = logging.getLogger("interlock")
    level = logger.level
    logger.addHandler(out)
    logger.setLevel(logging.INFO)
    try:
        yield Lines(stream)
    finally:
        logger.removeHandler(out)
        logger.setLevel(level)
