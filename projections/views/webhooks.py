"""Webhook notifications as a tracked read model: subscriptions, and an outbox fed from the log.

Each notifying event becomes one outbox row per subscription of its chat's tenant, written
in the same transaction that moves the view's position: a notification is never lost (the
position moves only with its rows) and never invented (a row exists only for a recorded
event; its id is derived from the event's notification id, so a rebuild writes the same ids).

Subscriptions and delivery state are written outside the projection's batches through
`transact`, a transaction that holds the view's position where it is.
"""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar, get_args

from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from pydantic import BaseModel, ConfigDict

from interlock.domain.chat.approval_events import (
    ApprovalRequested,
    ApprovalVoted,
    InterruptExpired,
    InterruptWithdrawn,
)
from interlock.domain.chat.events import (
    ChatStarted,
    Interrupted,
    Responded,
    Restarted,
    ToolRequested,
    TurnFinished,
)
from interlock.projections.engine.sql import PositionConflictError, ReadModel, Row, SqlView

EventType = Literal["interrupt.pending", "interrupt.decided", "interrupt.expired",
                    "turn.finished"]
EVENT_TYPES: tuple[EventType, ...] = get_args(EventType)
DeliveryStatus = Literal["pending", "delivered", "failed"]
T = TypeVar("T")

# What each event notifies, and the data it carries: one line per event. `decision` is the
# decision log's kind (`GET /v1/decisions`); a vote also says what the approval became.
NOTIFY: dict[type[Any], tuple[str, Callable[[Any], dict[str, Any]]]] = {
    Interrupted: ("interrupt.pending", lambda e: {"ref": e.ref, "metadata": e.metadata}),
    ApprovalRequested: ("interrupt.pending", lambda e: {
        "ref": e.ref, "metadata": {"approval": e.terms.model_dump(mode="json")}}),
    Responded: ("interrupt.decided", lambda e: {"ref": e.ref, "decision": "respond",
                                                "actor": e.actor}),
    Restarted: ("interrupt.decided", lambda e: {"ref": e.ref, "decision": "restart",
                                                "actor": e.actor}),
    ApprovalVoted: ("interrupt.decided", lambda e: {"ref": e.ref, "decision": e.vote,
                                                    "actor": e.actor, "outcome": e.outcome,
                                                    "reason": e.reason}),
    InterruptWithdrawn: ("interrupt.decided", lambda e: {"ref": e.ref, "decision": "withdraw",
                                                         "actor": e.actor, "reason": e.reason}),
    InterruptExpired: ("interrupt.expired", lambda e: {"ref": e.ref, "decision": "expire",
                                                       "expires_at": _iso(e.expires_at)}),
    TurnFinished: ("turn.finished", lambda e: {"finish_reason": e.reason, "error": e.error}),
}


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


class WebhooksView(SqlView):
    """Subscriptions, the chats and calls notifications are joined from, and the outbox."""

    view_name = "webhooks"
    tables = ("webhook_subs", "webhook_chats", "webhook_calls", "webhook_outbox",
              "webhook_due_idx")
    ddl = (
        "CREATE TABLE IF NOT EXISTS {webhook_subs} (id text PRIMARY KEY, tenant text NOT NULL,"
        " url text NOT NULL, secret text NOT NULL, events text NOT NULL,"
        " created_at {ts} NOT NULL)",
        "CREATE TABLE IF NOT EXISTS {webhook_chats} (chat_id text PRIMARY KEY,"
        " tenant text NOT NULL, agent text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS {webhook_calls} (chat_id text NOT NULL, ref text NOT NULL,"
        " name text NOT NULL, PRIMARY KEY (chat_id, ref))",
        "CREATE TABLE IF NOT EXISTS {webhook_outbox} (id text PRIMARY KEY, sub_id text NOT NULL,"
        " tenant text NOT NULL, type text NOT NULL, chat_id text NOT NULL,"
        " agent text NOT NULL, tool text, data text NOT NULL, event_at text NOT NULL,"
        " status text NOT NULL, attempts integer NOT NULL, next_at {ts} NOT NULL,"
        " last_error text, created_at {ts} NOT NULL)",
        "CREATE INDEX IF NOT EXISTS {webhook_due_idx} ON {webhook_outbox} (status, next_at)",
    )
    # The log-derived rows; subscriptions and delivery state are not derived from the log,
    # so rebuilding this view drops them (docs/webhooks.md).
    dump_sql = ("SELECT 'chat' AS kind, chat_id AS id, tenant || ' ' || agent AS data"
                " FROM {webhook_chats} UNION ALL SELECT 'outbox', id, type || ' ' || data"
                " FROM {webhook_outbox} ORDER BY kind, id")

    # -- written by the projection, inside its batches --------------------------------------

    _subscribed: bool | None = None  # read at a batch's first notification

    def _begin_batch(self) -> None:
        self._subscribed = None

    def chat_started(self, chat_id: str, tenant: str, agent: str) -> None:
        self._run("INSERT INTO {webhook_chats} VALUES (%(c)s, %(t)s, %(a)s)",
                  {"c": chat_id, "t": tenant, "a": agent})

    def tool_requested(self, chat_id: str, ref: str, name: str) -> None:
        self._run("INSERT INTO {webhook_calls} VALUES (%(c)s, %(r)s, %(n)s)"
                  " ON CONFLICT (chat_id, ref) DO NOTHING", {"c": chat_id, "r": ref, "n": name})

    def notify(self, position: int, kind: str, chat_id: str, ref: str | None,
               data: dict[str, Any], at: datetime) -> None:
        """One outbox row per subscription of the chat's tenant that wants `kind`."""
        if self._subscribed is None:
            # Once per batch, and only for a batch that notifies: with no subscription (most
            # servers) its events send no statement. They were all recorded before this
            # read, so a subscription created after it was not owed them.
            self._subscribed = bool(self._fetch("SELECT 1 FROM {webhook_subs} LIMIT 1", {}))
        if not self._subscribed:
            return
        # Tenant, agent and tool are joined in the same transaction (a chat may start and
        # interrupt within one batch); the body is composed from the row when sent.
        self._run(
            "INSERT INTO {webhook_outbox} SELECT 'msg_' || %(pos)s || '_' || s.id, s.id,"
            " h.tenant, %(k)s, h.chat_id, h.agent, (SELECT name FROM {webhook_calls}"
            " WHERE chat_id = %(c)s AND ref = %(r)s), %(d)s, %(when)s,"
            " 'pending', 0, %(at)s, NULL, %(at)s FROM {webhook_subs} s JOIN {webhook_chats} h"
            " ON h.tenant = s.tenant WHERE h.chat_id = %(c)s AND s.events LIKE %(like)s",
            {"pos": str(position), "k": kind, "c": chat_id, "r": ref or "", "at": self._ts(at),
             "d": json.dumps(data, separators=(",", ":"), sort_keys=True, default=str),
             "when": _iso(at), "like": f"%|{kind}|%"})

    # -- subscriptions and deliveries, outside the batches ---------------------------------

    def transact(self, work: Callable[[], T]) -> T:
        """Run `work`'s writes in one transaction that leaves the position where it is."""
        while True:
            start = self.store.position()
            try:
                with self.store.batch(start, start):
                    return work()
            except PositionConflictError:
                continue  # the projection moved on meanwhile: try again at its new position

    def subscribe(self, tenant: str, url: str, events: list[str]) -> Subscription:
        sub = Subscription(id=f"sub_{uuid.uuid4().hex}", tenant=tenant, url=url,
                           events=sorted(set(events)), created_at=datetime.now(UTC),
                           secret="whsec_" + _b64(secrets.token_bytes(24)))
        self.transact(lambda: self._run(
            "INSERT INTO {webhook_subs} VALUES (%(i)s, %(t)s, %(u)s, %(s)s, %(e)s, %(at)s)",
            {"i": sub.id, "t": tenant, "u": url, "s": sub.secret, "at": self._ts(sub.created_at),
             "e": "|" + "|".join(sub.events) + "|"}))
        return sub

    def subscriptions(self, tenant: str) -> list[Subscription]:
        rows = self._fetch("SELECT id, tenant, url, events, created_at FROM {webhook_subs}"
                           " WHERE tenant = %(t)s ORDER BY created_at, id", {"t": tenant})
        return [Subscription(id=r["id"], tenant=r["tenant"], url=r["url"],
                             events=[e for e in r["events"].split("|") if e],
                             created_at=self._load_ts(r["created_at"])) for r in rows]

    def unsubscribe(self, tenant: str, sub_id: str) -> bool:
        """Remove a subscription and its undelivered rows; False when there was none."""
        if not self._fetch("SELECT id FROM {webhook_subs} WHERE id = %(i)s AND tenant = %(t)s",
                           {"i": sub_id, "t": tenant}):
            return False

        def remove() -> None:
            self._run("DELETE FROM {webhook_subs} WHERE id = %(i)s", {"i": sub_id})
            self._run("DELETE FROM {webhook_outbox} WHERE sub_id = %(i)s AND status <> "
                      "'delivered'", {"i": sub_id})

        self.transact(remove)
        return True

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
        rows = self._select(f"SELECT {_OUT} FROM {{webhook_outbox}} o JOIN {{webhook_subs}} s"
                            " ON s.id = o.sub_id", conds, "o.created_at, o.id", params, limit)
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

    def claim(self, limit: int, lease: timedelta) -> list[Due]:
        """Pending rows that are due, leased to this caller (claims are serialised)."""
        now = datetime.now(UTC)
        if not self._fetch("SELECT id FROM {webhook_outbox} WHERE status = 'pending'"
                           " AND next_at <= %(now)s LIMIT 1", {"now": self._ts(now)}):
            return []  # the common case, answered without taking the write lock

        def take() -> list[Due]:
            rows = self._fetch(
                "SELECT o.id, o.attempts, o.type, o.tenant, o.chat_id, o.agent, o.tool, o.data,"
                " o.event_at, s.url, s.secret FROM {webhook_outbox} o"
                " JOIN {webhook_subs} s ON s.id = o.sub_id WHERE o.status = 'pending'"
                " AND o.next_at <= %(now)s ORDER BY o.next_at, o.id LIMIT %(limit)s",
                {"now": self._ts(now), "limit": limit})
            self._run_many(
                "UPDATE {webhook_outbox} SET attempts = attempts + 1, next_at = %(until)s"
                " WHERE id = %(i)s", [{"i": r["id"], "until": self._ts(now + lease)}
                                      for r in rows])
            return [Due(r["id"], r["attempts"] + 1, _body(r), r["url"], r["secret"])
                    for r in rows]

        return self.transact(take)

    def settle(self, delivery_id: str, status: DeliveryStatus, next_at: datetime,
               error: str | None) -> None:
        """Record how an attempt went."""
        self.transact(lambda: self._run(
            "UPDATE {webhook_outbox} SET status = %(s)s, next_at = %(n)s, last_error = %(e)s"
            " WHERE id = %(i)s", {"i": delivery_id, "s": status, "n": self._ts(next_at),
                                  "e": error}))

    def _delivery(self, r: Row) -> Delivery:
        return Delivery(id=r["id"], subscription_id=r["sub_id"], tenant=r["tenant"],
                        url=r["url"], type=r["type"], status=r["status"],
                        attempts=r["attempts"], next_attempt_at=self._load_ts(r["next_at"]),
                        last_error=r["last_error"], created_at=self._load_ts(r["created_at"]))


class Due:
    """A leased delivery: what to send, where, signed with which secret."""

    __slots__ = ("attempt", "body", "id", "secret", "url")

    def __init__(self, id: str, attempt: int, body: str, url: str, secret: str) -> None:
        self.id, self.attempt, self.body, self.url, self.secret = id, attempt, body, url, secret


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _body(r: Row) -> str:
    """The notification as sent: the same bytes on every attempt."""
    data = {**json.loads(r["data"]), "chat_id": r["chat_id"], "tenant": r["tenant"],
            "agent": r["agent"]}
    if r["tool"] is not None:
        data["tool"] = r["tool"]
    body = {"type": r["type"], "timestamp": r["event_at"], "data": data}
    return json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


class WebhooksProjection(Projection[WebhooksView]):
    """Feeds the outbox: each notifying event, for each subscription that wants it."""

    name = "webhooks"
    topics = (ChatStarted.TOPIC, ToolRequested.TOPIC, *(c.TOPIC for c in NOTIFY))

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Chats and calls are remembered; notifying events go to the outbox."""
        e, chat = domain_event, str(domain_event.originator_id)
        if isinstance(e, ChatStarted):
            self.view.chat_started(chat, e.tenant, e.agent)
        elif isinstance(e, ToolRequested):
            self.view.tool_requested(chat, e.ref, e.name)
        elif type(e) in NOTIFY:
            kind, data = NOTIFY[type(e)]
            self.view.notify(tracking.notification_id, kind, chat, getattr(e, "ref", None),
                             data(e), e.timestamp)


READ_MODEL = ReadModel(WebhooksView, WebhooksProjection)
