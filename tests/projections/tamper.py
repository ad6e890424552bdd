"""Direct SQL on the events table, as an intruder with database access would do it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import psycopg
from psycopg import sql

from interlock.domain.storage.chain import Record, chain_v2, link_value, with_chain
from interlock.domain.storage.keys import Keyring
from tests.conftest import PG_URL


class EventsTable:
    """Read and rewrite one chat's stored events (`state` is the event's JSON)."""

    def __init__(self, store: str, chat_id: UUID, purpose: str = "events") -> None:
        self.store, self.chat_id = store, chat_id
        parts = urlsplit(store)
        self.pg = parts.scheme.startswith("postgres")
        if self.pg:
            schema = parse_qs(parts.query)["schema"][0]
            self.table: Any = sql.Identifier(schema, f"interlock_{purpose}")
        else:
            self.path = parts.path.removeprefix("/")
            self.table = f"stored_{purpose}"

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        if self.pg:
            with psycopg.connect(PG_URL) as conn, conn.cursor() as cur:
                yield cur
        else:
            conn = sqlite3.connect(self.path)
            try:
                with conn:
                    yield conn.cursor()
            finally:
                conn.close()

    def _sql(self, template: str) -> Any:
        if self.pg:
            return sql.SQL(template.replace("?", "%s")).format(t=self.table)
        return template.format(t=self.table)

    def _id(self) -> Any:
        return self.chat_id if self.pg else self.chat_id.hex

    def states(self) -> dict[int, dict[str, Any]]:
        with self._cursor() as cur:
            cur.execute(self._sql("SELECT originator_version, state FROM {t}"
                                  " WHERE originator_id = ?"), (self._id(),))
            return {v: json.loads(bytes(s)) for v, s in cur.fetchall()}

    def write(self, version: int, state: dict[str, Any]) -> None:
        with self._cursor() as cur:
            cur.execute(self._sql("UPDATE {t} SET state = ? WHERE originator_id = ?"
                                  " AND originator_version = ?"),
                        (json.dumps(state).encode(), self._id(), version))

    def delete(self, version: int) -> None:
        with self._cursor() as cur:
            cur.execute(self._sql("DELETE FROM {t} WHERE originator_id = ?"
                                  " AND originator_version = ?"), (self._id(), version))

    def insert_before(self, version: int, state: dict[str, Any], topic: str) -> None:
        """Shift versions >= `version` up by one and put `state` at `version`."""
        with self._cursor() as cur:
            cur.execute(self._sql("UPDATE {t} SET originator_version = -originator_version"
                                  " WHERE originator_id = ? AND originator_version >= ?"),
                        (self._id(), version))
            cur.execute(self._sql("UPDATE {t} SET originator_version = 1 - originator_version"
                                  " WHERE originator_id = ? AND originator_version < 0"),
                        (self._id(),))
            cur.execute(self._sql("INSERT INTO {t} (originator_id, originator_version, topic,"
                                  " state) VALUES (?, ?, ?, ?)"),
                        (self._id(), version, topic, json.dumps(state).encode()))

    def records(self) -> dict[int, tuple[str, bytes]]:
        """Each version's topic and exact stored bytes."""
        with self._cursor() as cur:
            cur.execute(self._sql("SELECT originator_version, topic, state FROM {t}"
                                  " WHERE originator_id = ?"), (self._id(),))
            return {v: (t, bytes(s)) for v, t, s in cur.fetchall()}

    def write_raw(self, version: int, state: bytes) -> None:
        with self._cursor() as cur:
            cur.execute(self._sql("UPDATE {t} SET state = ? WHERE originator_id = ?"
                                  " AND originator_version = ?"), (state, self._id(), version))

    def set_topic(self, version: int, topic: str) -> None:
        with self._cursor() as cur:
            cur.execute(self._sql("UPDATE {t} SET topic = ? WHERE originator_id = ?"
                                  " AND originator_version = ?"), (topic, self._id(), version))

    def delete_from(self, version: int) -> None:
        """Cut the chat's tail: every version from `version` on."""
        with self._cursor() as cur:
            cur.execute(self._sql("DELETE FROM {t} WHERE originator_id = ?"
                                  " AND originator_version >= ?"), (self._id(), version))

    def reseal(self, secret: bytes) -> None:
        """Recompute the whole chain (format 2) with another key, as an intruder would."""
        keys, prev = Keyring.single(secret), ""
        for version, (topic, _) in sorted(self.records().items()):
            state = {k: v for k, v in self.states()[version].items() if k != "chain"}
            body = json.dumps(state, separators=(",", ":")).encode()
            chain = chain_v2(keys, prev, Record(self.chat_id, version, topic, body))
            self.write_raw(version, with_chain(body, chain))
            prev = link_value(chain)
