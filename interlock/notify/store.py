"""The notification outbox, the notifier's place in the log, and the Slack callbacks seen:
small tables of the store (SQLite or PostgreSQL), so nothing is lost across a restart."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from interlock.domain import Interlock
from interlock.domain.errors import ConfigurationError
from interlock.stores.tables import table_of

Kind = Literal["email", "slack", "slack_update"]


@dataclass(frozen=True)
class Row:
    id: str
    tenant: str
    kind: Kind
    chat_id: str
    ref: str
    recipient: str
    payload: dict[str, Any]
    attempts: int
    due: float | None = None  # when it may be sent (quiet hours, a digest's period); now if None


class NotifyStore:
    """`notify_outbox` rows are written once per (event, channel, recipient): a notification
    queued twice (a restart between queueing and moving the cursor) is still one row."""

    def __init__(self, app: Interlock) -> None:
        outbox, cursor, seen = (table_of(app, n) for n in (
            "notify_outbox", "notify_cursor", "notify_slack_seen"))
        if outbox is None or cursor is None or seen is None:
            raise ConfigurationError("notifications need a SQLite or PostgreSQL store")
        self.outbox, self.cursor, self.seen = outbox, cursor, seen
        outbox.create("CREATE TABLE IF NOT EXISTS {t} (id text PRIMARY KEY, tenant text NOT NULL,"
                      " kind text NOT NULL, chat_id text NOT NULL, ref text NOT NULL,"
                      " recipient text NOT NULL, payload text NOT NULL, status text NOT NULL,"
                      " attempts integer NOT NULL, due double precision NOT NULL,"
                      " sent text)")
        outbox.create("CREATE INDEX IF NOT EXISTS notify_outbox_call ON {t} (chat_id, ref)")
        cursor.create("CREATE TABLE IF NOT EXISTS {t} (name text PRIMARY KEY,"
                      " position bigint NOT NULL)")
        seen.create("CREATE TABLE IF NOT EXISTS {t} (signature text PRIMARY KEY,"
                    " at double precision NOT NULL)")

    def position(self) -> int:
        rows = self.cursor.run(self.cursor.sql("SELECT position FROM {t} WHERE name = ?"),
                               ("notifier",))
        return int(rows[0][0]) if rows else 0

    def move_to(self, position: int) -> None:
        self.cursor.run(self.cursor.sql(
            "INSERT INTO {t} VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET position ="
            " excluded.position"), ("notifier", position))

    def queue(self, rows: list[Row]) -> None:
        statement = self.outbox.sql("INSERT INTO {t} VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0,"
                                    " ?, NULL) ON CONFLICT (id) DO NOTHING")
        for r in rows:
            self.outbox.run(statement, (r.id, r.tenant, r.kind, r.chat_id, r.ref, r.recipient,
                                        json.dumps(r.payload), r.due or time.time()))

    def due(self, limit: int = 100) -> list[Row]:
        rows = self.outbox.run(self.outbox.sql(
            "SELECT id, tenant, kind, chat_id, ref, recipient, payload, attempts FROM {t}"
            " WHERE status = 'pending' AND due <= ? ORDER BY id LIMIT ?"), (time.time(), limit))
        return [Row(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7]) for r in rows]

    def sent(self, row: Row, receipt: dict[str, Any]) -> None:
        self.outbox.run(self.outbox.sql(
            "UPDATE {t} SET status = 'sent', sent = ?, attempts = attempts + 1 WHERE id = ?"),
            (json.dumps(receipt), row.id))

    def failed(self, row: Row, max_attempts: int) -> bool:
        """One more failed attempt, retried with backoff; True once it is given up."""
        given_up = row.attempts + 1 >= max_attempts
        self.outbox.run(self.outbox.sql(
            "UPDATE {t} SET attempts = attempts + 1, status = ?, due = ? WHERE id = ?"),
            ("failed" if given_up else "pending", time.time() + min(2 ** row.attempts, 300),
             row.id))
        return given_up

    def receipts(self, chat_id: str, ref: str) -> list[dict[str, Any]]:
        """Where the Slack messages about a call went (channel and ts), to update them."""
        rows = self.outbox.run(self.outbox.sql(
            "SELECT sent FROM {t} WHERE chat_id = ? AND ref = ? AND kind = 'slack'"
            " AND status = 'sent'"), (chat_id, ref))
        return [json.loads(r[0]) for r in rows]

    def tenant_told(self, chat_id: str, ref: str) -> str | None:
        """The tenant of a call some Slack user was (or is to be) told of; None if nobody."""
        rows = self.outbox.run(self.outbox.sql(
            "SELECT tenant FROM {t} WHERE chat_id = ? AND ref = ? AND kind = 'slack' LIMIT 1"),
            (chat_id, ref))
        return str(rows[0][0]) if rows else None

    def stuck(self) -> int:
        rows = self.outbox.run(self.outbox.sql(
            "SELECT count(*) FROM {t} WHERE status = 'failed'"), ())
        return int(rows[0][0])

    def waiting(self) -> int:
        rows = self.outbox.run(self.outbox.sql(
            "SELECT count(*) FROM {t} WHERE status = 'pending'"), ())
        return int(rows[0][0])

    def first_sight(self, signature: str) -> bool:
        """True the first time a callback's signature is seen: a replay is refused."""
        inserted = self.seen.run(self.seen.sql(
            "INSERT INTO {t} VALUES (?, ?) ON CONFLICT (signature) DO NOTHING RETURNING 1"),
            (signature, time.time()))
        return bool(inserted)
