"""A store holding the recorded banking corpus, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from tests.conftest import PG_URL
from tests.replay.corpus import record, served


@dataclass(frozen=True)
class Recorded:
    url: str
    chats: list[UUID]

    def dump(self) -> list[tuple[Any, ...]]:
        """Every stored event, as the store holds it (bytes and all)."""
        parts = urlsplit(self.url)
        if parts.scheme == "sqlite":
            with sqlite3.connect(parts.path) as conn:
                return conn.execute("SELECT * FROM stored_events ORDER BY rowid").fetchall()
        schema = parse_qs(parts.query)["schema"][0]
        with psycopg.connect(PG_URL) as conn:
            return conn.execute(sql.SQL("SELECT * FROM {}.interlock_events ORDER BY "
                                        "notification_id").format(sql.Identifier(schema))
                                ).fetchall()


@pytest.fixture
def recorded(store: str) -> Recorded:
    """The five banking conversations, recorded as `interlock serve` records them."""
    app = served(store)
    try:
        chats = asyncio.run(record(app))
    finally:
        app.close()
    return Recorded(store, chats)
