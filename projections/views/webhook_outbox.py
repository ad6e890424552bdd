"""The webhooks view's delivery side: subscriptions and deliveries as rows, the outbox's
claims, leases and settlements, pruning, erasure and the legacy table.

These tables are written outside the projection's batches, through `transact`: a
transaction that holds the view's position where it is. The outbox, the secrets and the
high-water mark are never rebuilt from the log (a rebuild keeps them; webhooks.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

from eventsourcing.persistence import ProgrammingError
from pydantic import BaseModel, ConfigDict

from interlock.domain.storage.erasure import ERASED
from interlock.projections.engine.sql import PositionConflictError, Row, SqlView

DeliveryStatus = Literal["pending", "delivered", "failed"]
T = TypeVar("T")


class Subscription(BaseModel):
    """Where a tenant's notifications go (the secret is shown once, at creation)."""

    model_config = ConfigDict(frozen=True)

    id: str
    tenant: str
    url: str
    events: list[str]
    created_at: datetime
    secret: str | None = None


class Delivery(BaseModel):
    """One notification to one subscription, and how its delivery went."""

    model_config = ConfigDict(frozen=True)

    id: str
    subscription_id: str
    tenant: str
    url: str
    type: str
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime
    last_error: str | None = None
    created_at: datetime


_OUT = ("o.id, o.sub_id, o.tenant, s.url, o.type, o.status, o.attempts, o.next_at,"
        " o.last_error, o.created_at")



class WebhookOutbox(SqlView):
    """Subscriptions read, secrets kept, deliveries claimed and settled (webhooks.py has the
    tables and the projection's writes)."""

    def transact(self, work: Callable[[], T]) -> T:
        """Run `work`'s writes in one transaction that leaves the position where it is."""
        while True:
            start = self.store.position()
            try:
                with self.store.batch(start, start):
                    return work()
            except PositionConflictError:
                continue  # the projection moved on meanwhile: try again at its new position

    def keep_secret(self, sub_id: str, secret: str) -> None:
        """The signing secret of a subscription about to be recorded (never in the log)."""
        self.transact(lambda: self._run(
            "INSERT INTO {webhook_secrets} VALUES (%(i)s, %(s)s) ON CONFLICT (id) DO NOTHING",
            {"i": sub_id, "s": secret}))

    def secret(self, sub_id: str) -> str | None:
        rows = self._fetch("SELECT secret FROM {webhook_secrets} WHERE id = %(i)s", {"i": sub_id})
        return str(rows[0]["secret"]) if rows else None

    def subscriptions(self, tenant: str) -> list[Subscription]:
        rows = self._fetch("SELECT id, tenant, url, events, created_at FROM"
                           " {webhook_subscriptions} WHERE tenant = %(t)s ORDER BY created_at,"
                           " id", {"t": tenant})
        return [Subscription(id=r["id"], tenant=r["tenant"], url=r["url"],
                             events=[e for e in r["events"].split("|") if e],
                             created_at=self._load_ts(r["created_at"])) for r in rows]

    def deliveries(self, tenant: str | None, status: DeliveryStatus | None,
                   limit: int = 100) -> list[Delivery]:
        conds: list[str] = []
        params: dict[str, Any] = {}
        if tenant is not None:
            conds.append("o.tenant = %(t)s")
            params["t"] = tenant
        if status is not None:
            conds.append("o.status = %(s)s")
            params["s"] = status
        rows = self._select(f"SELECT {_OUT} FROM {{webhook_outbox}} o JOIN"
                            " {webhook_subscriptions} s ON s.id = o.sub_id", conds,
                            "o.created_at, o.id", params, limit)
        return [self._delivery(r) for r in rows]

    def redeliver(self, tenant: str | None, delivery_id: str) -> bool:
        """Queue a delivery again from its first attempt; False when there is no such one."""
        params = {"i": delivery_id, "now": self._ts(datetime.now(UTC))}
        cond = "id = %(i)s"
        if tenant is not None:
            cond += " AND tenant = %(t)s"
            params["t"] = tenant
        if not self._fetch(f"SELECT id FROM {{webhook_outbox}} WHERE {cond}", params):
            return False
        self.transact(lambda: self._run(
            "UPDATE {webhook_outbox} SET status = 'pending', attempts = 0, next_at = %(now)s,"
            f" last_error = NULL WHERE {cond}", params))
        return True

    def claim(self, limit: int, lease: timedelta, per_tenant: int = 1 << 30,
              busy: Mapping[str, int] | None = None) -> list[Due]:
        """Pending rows that are due, leased to this caller (claims are serialised): at most
        `per_tenant` in flight per tenant, counting the `busy` ones already sent."""
        now, busy = datetime.now(UTC), busy or {}
        if not self._fetch("SELECT id FROM {webhook_outbox} WHERE status = 'pending'"
                           " AND next_at <= %(now)s LIMIT 1", {"now": self._ts(now)}):
            return []  # the common case, answered without taking the write lock

        def take() -> list[Due]:
            rows = self._fetch(_DUE, {"now": self._ts(now), "per": per_tenant,
                                      "cap": limit + sum(busy.values())})
            rows = [r for r in rows if r["n"] + busy.get(r["tenant"], 0) <= per_tenant][:limit]
            self._run_many(
                "UPDATE {webhook_outbox} SET attempts = attempts + 1, next_at = %(until)s"
                " WHERE id = %(i)s", [{"i": r["id"], "until": self._ts(now + lease)}
                                      for r in rows])
            return [Due(r["id"], r["attempts"] + 1, _body(r), r["url"], r["secret"],
                        r["tenant"]) for r in rows]

        return self.transact(take)

    def settle(self, delivery_id: str, status: DeliveryStatus, next_at: datetime,
               error: str | None) -> None:
        """Record how an attempt went."""
        self.transact(lambda: self._run(
            "UPDATE {webhook_outbox} SET status = %(s)s, next_at = %(n)s, last_error = %(e)s"
            " WHERE id = %(i)s", {"i": delivery_id, "s": status, "n": self._ts(next_at),
                                  "e": error}))

    def prune(self, before: datetime) -> int:
        """Remove delivered and failed rows settled before `before`; how many went."""
        params = {"before": self._ts(before)}
        done = "status IN ('delivered', 'failed') AND next_at < %(before)s"
        count = len(self._fetch(f"SELECT id FROM {{webhook_outbox}} WHERE {done}", params))
        if count:
            self.transact(lambda: self._run(f"DELETE FROM {{webhook_outbox}} WHERE {done}",
                                            params))
        return count

    def forget_chat(self, chat_id: str) -> int:
        """Redact an erased chat's notifications (the text its events no longer show)."""
        rows = self._fetch("SELECT id, data FROM {webhook_outbox} WHERE chat_id = %(c)s",
                           {"c": chat_id})
        redacted = [{"i": r["id"], "d": _redacted(r["data"])} for r in rows]
        if redacted:
            self.transact(lambda: self._run_many(
                "UPDATE {webhook_outbox} SET data = %(d)s WHERE id = %(i)s", redacted))
        return len(redacted)

    def legacy_subscriptions(self) -> list[Row]:
        """The rows of the table subscriptions lived in before they were events (if any)."""
        try:
            return self._fetch("SELECT id, tenant, url, secret, events, created_at"
                               " FROM {webhook_subs} ORDER BY created_at, id", {})
        except (sqlite3.OperationalError, ProgrammingError):  # PostgreSQL's, wrapped
            return []  # no such table: a new store, or migrated already

    def drop_legacy(self) -> None:
        self.transact(lambda: self._run("DROP TABLE IF EXISTS {webhook_subs}", {}))

    def _delivery(self, r: Row) -> Delivery:
        return Delivery(id=r["id"], subscription_id=r["sub_id"], tenant=r["tenant"],
                        url=r["url"], type=r["type"], status=r["status"],
                        attempts=r["attempts"], next_attempt_at=self._load_ts(r["next_at"]),
                        last_error=r["last_error"], created_at=self._load_ts(r["created_at"]))


# Due rows with their rank within their tenant (oldest first), for fair claims.
_DUE = ("SELECT * FROM (SELECT o.id, o.attempts, o.type, o.tenant, o.chat_id, o.agent, o.tool,"
        " o.data, o.event_at, o.next_at, s.url, k.secret, ROW_NUMBER() OVER (PARTITION BY"
        " o.tenant ORDER BY o.next_at, o.id) AS n FROM {webhook_outbox} o"
        " JOIN {webhook_subscriptions} s ON s.id = o.sub_id JOIN {webhook_secrets} k"
        " ON k.id = o.sub_id WHERE o.status = 'pending' AND o.next_at <= %(now)s) d"
        " WHERE n <= %(per)s ORDER BY next_at, id LIMIT %(cap)s")


class Due:
    """A leased delivery: what to send, where, signed with which secret."""

    __slots__ = ("attempt", "body", "id", "secret", "tenant", "url")

    def __init__(self, id: str, attempt: int, body: str, url: str, secret: str,
                 tenant: str = "") -> None:
        self.id, self.attempt, self.body, self.url, self.secret = id, attempt, body, url, secret
        self.tenant = tenant


def _redacted(data: str) -> str:
    """A notification's data as its erased chat's events now read: no text of theirs."""
    fields = json.loads(data)
    metadata = fields.get("metadata")
    if metadata is not None and not (isinstance(metadata, dict) and set(metadata) == {
            "approval"}):  # an approval's terms are the policy's, not personal data
        fields["metadata"] = None
    for name in ("reason", "error"):
        if fields.get(name) is not None:
            fields[name] = ERASED
    return json.dumps(fields, separators=(",", ":"), sort_keys=True)


def _body(r: Row) -> str:
    """The notification as sent: the same bytes on every attempt."""
    data = {**json.loads(r["data"]), "chat_id": r["chat_id"], "tenant": r["tenant"],
            "agent": r["agent"]}
    if r["tool"] is not None:
        data["tool"] = r["tool"]
    body = {"type": r["type"], "timestamp": r["event_at"], "data": data}
    return json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
