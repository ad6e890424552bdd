"""The notification outbox, the notifier's place in the log, and the Slack callbacks seen:
small tables of the store (SQLite or PostgreSQL), so nothing is lost across a restart."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from interlock.domain import Interlock
from interlock.domain.errors import ConfigurationError
from interlock.stores.tables import table_of


@dataclass(frozen=True)
class Row:
    """One notification to send. Its payload holds no personal data: the event's version
    (what is said is read from the chat when sent, so it follows the chat's erasure) and
    whether it waits for a digest, or a decided call's outcome for an update. `kind` names the
row's channel (interlock/notify/channels/registry.py)."""

    id: str
    tenant: str
    kind: str
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

    def failed(self, row: Row, max_attempts: int, *, for_good: bool = False) -> bool:
        """One more failed attempt, retried with backoff; True once it is given up (at
        `max_attempts`, or at once `for_good`: a row that can never be sent as it is)."""
        given_up = for_good or row.attempts + 1 >= max_attempts
        self.outbox.run(self.outbox.sql(
            "UPDATE {t} SET attempts = attempts + 1, status = ?, due = ? WHERE id = ?"),
            ("failed" if given_up else "pending", time.time() + min(2 ** row.attempts, 300),
             row.id))
        return given_up

    def erased(self, row: Row) -> None:
        """Not sent, and never to be: its chat's personal data was erased."""
        self.outbox.run(self.outbox.sql(
            "UPDATE {t} SET status = 'erased' WHERE id = ? AND status = 'pending'"), (row.id,))

    def forget_chat(self, chat_id: str) -> int:
        """The chat was erased: its rows still waiting are never sent, and no row keeps an
        input (rows queued before the outbox held no personal data copied it in clear);
        how many were waiting."""
        waiting = self.outbox.run(self.outbox.sql(
            "UPDATE {t} SET status = 'erased' WHERE chat_id = ? AND status = 'pending'"
            " RETURNING 1"), (chat_id,))
        rows = self.outbox.run(self.outbox.sql(
            "SELECT id, payload, sent FROM {t} WHERE chat_id = ?"), (chat_id,))
        scrub = self.outbox.sql("UPDATE {t} SET payload = ?, sent = ? WHERE id = ?")
        for row_id, payload, sent in rows:
            receipt = json.loads(sent) if sent else None
            if isinstance(receipt, dict) and isinstance(receipt.get("facts"), dict):
                receipt["facts"] = _without_input(receipt["facts"])
            self.outbox.run(scrub, (json.dumps(_without_input(json.loads(payload))),
                                    None if receipt is None else json.dumps(receipt), row_id))
        return len(waiting)

    def receipts(self, chat_id: str, ref: str, kind: str) -> list[dict[str, Any]]:
        """What the `kind` rows about a call left when sent (e.g. where a message went), to
        update them."""
        rows = self.outbox.run(self.outbox.sql(
            "SELECT sent FROM {t} WHERE chat_id = ? AND ref = ? AND kind = ?"
            " AND status = 'sent'"), (chat_id, ref, kind))
        return [json.loads(r[0]) for r in rows]

    def tenant_told(self, chat_id: str, ref: str, kind: str) -> str | None:
        """The tenant of a call someone was (or is to be) told of by a `kind` row; None if
        nobody."""
        rows = self.outbox.run(self.outbox.sql(
            "SELECT tenant FROM {t} WHERE chat_id = ? AND ref = ? AND kind = ? LIMIT 1"),
            (chat_id, ref, kind))
        return str(rows[0][0]) if rows else None

    def stuck(self) -> int:
        """Rows given up after their retries."""
        return self.counts().get("failed", 0)

    def waiting(self) -> int:
        return self.counts().get("pending", 0)

    def counts(self) -> dict[str, int]:
        """Rows by status: pending, sent, failed (given up), erased (never to be sent)."""
        rows = self.outbox.run(self.outbox.sql(
            "SELECT status, count(*) FROM {t} GROUP BY status"), ())
        return {str(status): int(n) for status, n in rows}

    def first_sight(self, signature: str) -> bool:
        """True the first time a callback's signature is seen: a replay is refused."""
        inserted = self.seen.run(self.seen.sql(
            "INSERT INTO {t} VALUES (?, ?) ON CONFLICT (signature) DO NOTHING RETURNING 1"),
            (signature, time.time()))
        return bool(inserted)


def _without_input(facts: dict[str, Any]) -> dict[str, Any]:
    """A message's facts less the call's input (the personal part: erasable in the chat)."""
    return {k: v for k, v in facts.items() if k != "input"}


def forget_chat(app: Interlock, chat_id: str) -> int:
    """`NotifyStore.forget_chat` for an erasure: none where the store keeps no tables."""
    if table_of(app, "notify_outbox") is None:
        return 0
    return NotifyStore(app).forget_chat(chat_id)
