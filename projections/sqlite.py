"""SQLite views: one connection (file or memory) shared by the views, one writer at a time."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import Tracking

from interlock.projections.sqlviews import (
    Row,
    SqlChatsView,
    SqlDecisionsView,
    SqlInboxView,
    SqlView,
)
from interlock.projections.stats import percentile
from interlock.projections.views import PositionConflictError

_PARAM = re.compile(r"%\((\w+)\)s")
_TYPES = {"json": "text", "ts": "text"}
_TRACKING = ("CREATE TABLE IF NOT EXISTS {tracking} (application_name text PRIMARY KEY,"
             " notification_id integer NOT NULL)")
_ADVANCE = ("INSERT INTO {tracking} VALUES (%(app)s, %(upto)s) ON CONFLICT (application_name)"
            " DO UPDATE SET notification_id = excluded.notification_id"
            " WHERE notification_id = %(start)s RETURNING notification_id")


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


class SQLiteView(SqlView):
    """Base of the SQLite views; tables are `<prefix>_<name>`, timestamps ISO-8601 UTC text."""

    def __init__(self, db: SQLiteDb, *, prefix: str = "interlock",
                 application_name: str = "Interlock") -> None:
        self.db = db
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
            for template in (_TRACKING, *self.ddl):
                self.db.conn.execute(self._q(template))

    def position(self) -> int:
        return self.max_tracking_id(self.application_name) or 0

    def max_tracking_id(self, application_name: str) -> int | None:
        rows = self._fetch("SELECT notification_id FROM {tracking} WHERE application_name = %(a)s",
                           {"a": application_name})
        return int(rows[0]["notification_id"]) if rows else None

    def insert_tracking(self, tracking: Tracking) -> None:
        start = self.max_tracking_id(tracking.application_name) or 0
        with self.batch(start, tracking.notification_id):
            pass

    @contextmanager
    def batch(self, start: int, upto: int) -> Iterator[None]:
        with self.db.lock:
            self.db.conn.execute("BEGIN IMMEDIATE")
            try:
                self._check(start)
                self._begin_batch()
                yield
                self._before_commit()
                self._advance(start, upto)
            except BaseException:
                self.db.conn.execute("ROLLBACK")
                raise
            self.db.conn.execute("COMMIT")

    def _check(self, start: int) -> None:
        found = self.position()
        if found != start:
            raise PositionConflictError(self.view_name, start, found)

    def _advance(self, start: int, upto: int) -> None:
        params = {"app": self.application_name, "start": start, "upto": upto}
        if self.db.conn.execute(self._q(_ADVANCE), params).fetchone() is None:
            raise PositionConflictError(self.view_name, start, None)

    def drop(self) -> None:
        with self.db.lock:
            for name in (*self.tables, "tracking"):
                kind = "INDEX" if name.endswith("_idx") else "TABLE"
                self.db.conn.execute(f"DROP {kind} IF EXISTS {self._names[name]}")

    def _run(self, template: str, params: Mapping[str, Any]) -> None:
        self.db.conn.execute(self._q(template), params)

    def _run_many(self, template: str, params: Sequence[Mapping[str, Any]]) -> None:
        self.db.conn.executemany(self._q(template), params)

    def _fetch(self, template: str, params: Mapping[str, Any]) -> list[Row]:
        with self.db.lock:
            return [dict(r) for r in self.db.conn.execute(self._q(template), params)]

    def _json(self, value: Any) -> Any:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    def _ts(self, value: datetime) -> Any:
        return value.astimezone(UTC).isoformat(timespec="microseconds")

    def _load_json(self, value: Any) -> Any:
        return None if value is None else json.loads(value)

    def _load_ts(self, value: Any) -> datetime:
        return datetime.fromisoformat(value)


class SQLiteInboxView(SQLiteView, SqlInboxView):
    """The approvers' inbox in SQLite."""


class SQLiteDecisionsView(SQLiteView, SqlDecisionsView):
    """The decision log in SQLite; percentiles computed here."""

    def _percentiles(self, where: str, params: dict[str, Any]) -> tuple[float | None, float | None]:
        rows = self._fetch(f"SELECT requested_at, decided_at FROM {{decisions}}{where}", params)
        waits = sorted((self._load_ts(r["decided_at"]) - self._load_ts(r["requested_at"]))
                       .total_seconds() for r in rows)
        return percentile(waits, 0.5), percentile(waits, 0.95)


class SQLiteChatsView(SQLiteView, SqlChatsView):
    """Chat summaries in SQLite."""


def sqlite_views(
    db: SQLiteDb, application_name: str = "Interlock"
) -> tuple[SQLiteInboxView, SQLiteDecisionsView, SQLiteChatsView]:
    prefix = application_name.lower()
    views = (SQLiteInboxView(db, prefix=prefix, application_name=application_name),
             SQLiteDecisionsView(db, prefix=prefix, application_name=application_name),
             SQLiteChatsView(db, prefix=prefix, application_name=application_name))
    for view in views:
        view.setup()
    return views
