"""The SQLite backend: one connection (file or memory) shared by the views, one writer at a time."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import Tracking

from interlock.projections.engine.sql import (
    VERSION_KEY,
    PositionConflictError,
    ReadModel,
    Row,
    SqlView,
    ViewStore,
)

_PARAM = re.compile(r"%\((\w+)\)s")
_TYPES = {"json": "text", "ts": "text"}
_TRACKING = ("CREATE TABLE IF NOT EXISTS {tracking} (application_name text PRIMARY KEY,"
             " notification_id integer NOT NULL)")
_ADVANCE = ("INSERT INTO {tracking} VALUES (%(app)s, %(upto)s) ON CONFLICT (application_name)"
            " DO UPDATE SET notification_id = excluded.notification_id"
            " WHERE notification_id = %(start)s RETURNING notification_id")
_VERSION = ("INSERT INTO {tracking} VALUES (%(key)s, %(version)s) ON CONFLICT (application_name)"
            " DO UPDATE SET notification_id = excluded.notification_id")


class SQLiteDb:
    """A SQLite connection guarded by a lock; `:memory:` serves the memory store."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None,
                                    timeout=30)
        self.conn.row_factory = sqlite3.Row
        if path != ":memory:":
            self.conn.execute("PRAGMA journal_mode=WAL")
        self.lock = threading.RLock()

    def close(self) -> None:
        with self.lock:
            self.conn.close()


class SQLiteViewStore(ViewStore):
    """One view in SQLite; tables are `<prefix>_<name>`, timestamps ISO-8601 UTC text."""

    dialect = "sqlite"

    def __init__(self, db: SQLiteDb, view: type[SqlView], *, prefix: str = "interlock",
                 application_name: str = "Interlock") -> None:
        self.db = db
        self.view_name, self.tables, self.ddl = view.view_name, view.tables, view.ddl
        self.version = view.version
        self.application_name = application_name
        self._names = {name: f'"{prefix}_{name}"' for name in self.tables}
        self._names["tracking"] = f'"{prefix}_{self.view_name}_tracking"'
        self._composed: dict[str, str] = {}

    def _q(self, template: str) -> str:
        composed = self._composed.get(template)
        if composed is None:
            composed = _PARAM.sub(r":\1", template.format(**self._names, **_TYPES))
            self._composed[template] = composed
        return composed

    def setup(self) -> None:
        with self.db.lock:
            self.db.conn.execute(self._q(_TRACKING))
            if self._recorded_version() != self.version:  # another shape: rebuilt
                self.reset()
                return
            for template in self.ddl:
                self.db.conn.execute(self._q(template))

    def _recorded_version(self) -> int:
        return self.max_tracking_id(VERSION_KEY) or 1

    def position(self) -> int:
        return self.max_tracking_id(self.application_name) or 0

    def max_tracking_id(self, application_name: str) -> int | None:
        rows = self.fetch("SELECT notification_id FROM {tracking} WHERE application_name = %(a)s",
                          {"a": application_name})
        return int(rows[0]["notification_id"]) if rows else None

    def insert_tracking(self, tracking: Tracking) -> None:
        start = self.max_tracking_id(tracking.application_name) or 0
        with self.batch(start, tracking.notification_id):
            pass

    @contextmanager
    def batch(self, start: int, upto: int) -> Iterator[None]:
        with self._transaction():
            self._check(start)
            yield
            self._advance(start, upto)

    def _check(self, start: int) -> None:
        found = self.position()
        if found != start:
            raise PositionConflictError(self.view_name, start, found)

    def _advance(self, start: int, upto: int) -> None:
        params = {"app": self.application_name, "start": start, "upto": upto}
        if self.db.conn.execute(self._q(_ADVANCE), params).fetchone() is None:
            raise PositionConflictError(self.view_name, start, None)

    def drop(self) -> None:
        with self._transaction():
            self._drop()

    def reset(self) -> None:
        with self._transaction():
            self._drop()
            for template in (_TRACKING, *self.ddl):
                self.db.conn.execute(self._q(template))
            if self.version != 1:
                self.db.conn.execute(self._q(_VERSION), {"key": VERSION_KEY,
                                                         "version": self.version})

    def _drop(self) -> None:
        for name in (*self.tables, "tracking"):
            kind = "INDEX" if name.endswith("_idx") else "TABLE"
            self.db.conn.execute(f"DROP {kind} IF EXISTS {self._names[name]}")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self.db.lock:
            self.db.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.db.conn.execute("ROLLBACK")
                raise
            self.db.conn.execute("COMMIT")

    def run(self, template: str, params: Mapping[str, Any]) -> None:
        self.db.conn.execute(self._q(template), params)

    def run_many(self, template: str, params: Sequence[Mapping[str, Any]]) -> None:
        self.db.conn.executemany(self._q(template), params)

    def fetch(self, template: str, params: Mapping[str, Any]) -> list[Row]:
        with self.db.lock:
            return [dict(r) for r in self.db.conn.execute(self._q(template), params)]

    def encode_json(self, value: Any) -> Any:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    def encode_ts(self, value: datetime) -> Any:
        return value.astimezone(UTC).isoformat(timespec="microseconds")

    def load_json(self, value: Any) -> Any:
        return None if value is None else json.loads(value)

    def load_ts(self, value: Any) -> datetime:
        return datetime.fromisoformat(value)


def sqlite_views(
    db: SQLiteDb, application_name: str,
    read_models: Iterable[ReadModel], *, prefix: str | None = None,
) -> list[SqlView]:
    """The views of `read_models` (the wiring's registry) in `db`, created if missing;
    tables are named `<prefix>_<view>` (the application's name by default)."""
    prefix = prefix or application_name.lower()
    return [m.open(SQLiteViewStore(db, m.view, prefix=prefix, application_name=application_name))
            for m in read_models]
