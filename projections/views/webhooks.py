"""Webhook notifications as a tracked read model: subscriptions, and an outbox fed from the log.

Subscriptions are events (`domain/webhooks.py`); this view rebuilds them from the log. Each
notifying event becomes one outbox row per subscription of its chat's tenant, written in
the same transaction that moves the view's position: a notification is never lost (the
position moves only with its rows) and never invented (a row exists only for a recorded
event; its id is derived from the event's notification id).

The outbox, the secrets and the outbox's high-water mark are not rebuilt from the log, so a
rebuild keeps them: it drops and replays only the subscriptions, chats and calls, and an
event at or below the mark is never queued again (delivered, pending or pruned). Delivery
state is written outside the projection's batches through `transact`, a transaction that
holds the view's position where it is.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar, get_args

from eventsourcing.persistence import ProgrammingError, Tracking
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
from interlock.domain.storage.erasure import ERASED
from interlock.domain.webhooks import WebhookSubscribed, WebhookUnsubscribed, public_id
from interlock.projections.engine.sql import (
    PositionConflictError,
    ReadModel,
    Row,
    SqlView,
    ViewStore,
)

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


REBUILT = ("webhook_subscriptions", "webhook_chats", "webhook_calls")
KEPT = ("webhook_outbox", "webhook_due_idx", "webhook_chat_idx", "webhook_secrets",
        "webhook_marks")
LEGACY = "webhook_subs"  # subscriptions before they were events: migrated, then dropped


class WebhooksView(SqlView):
    """Subscriptions and the chats and calls notifications are joined from (rebuilt from the
    log), and the outbox, the secrets and the outbox's high-water mark (kept by a rebuild)."""

    view_name = "webhooks"
    tables = (*REBUILT, *KEPT, LEGACY)
    ddl = (
        "CREATE TABLE IF NOT EXISTS {webhook_subscriptions} (id text PRIMARY KEY,"
        " tenant text NOT NULL, url text NOT NULL, events text NOT NULL,"
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
        "CREATE INDEX IF NOT EXISTS {webhook_chat_idx} ON {webhook_outbox} (chat_id)",
        "CREATE TABLE IF NOT EXISTS {webhook_secrets} (id text PRIMARY KEY,"
        " secret text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS {webhook_marks} (name text PRIMARY KEY,"
        " position bigint NOT NULL)",
        "INSERT INTO {webhook_marks} VALUES ('outbox', 0) ON CONFLICT (name) DO NOTHING",
    )
    dump_sql = ("SELECT 'chat' AS kind, chat_id AS id, tenant || ' ' || agent AS data"
                " FROM {webhook_chats} UNION ALL SELECT 'sub', id, tenant || ' ' || url || ' '"
                " || events FROM {webhook_subscriptions} UNION ALL SELECT 'outbox', id,"
                " type || ' ' || data FROM {webhook_outbox} ORDER BY kind, id")

    def __init__(self, store: ViewStore, read_model: ReadModel) -> None:
        super().__init__(store, read_model)
        # A rebuild (reset) drops only what the log rebuilds: delivery state, secrets and
        # the high-water mark outlive it, and the legacy table waits for its migration.
        store.tables = REBUILT  # type: ignore[attr-defined]  # both backends drop these

    # -- written by the projection, inside its batches --------------------------------------

    _subscribed: bool | None = None  # read at a batch's first notification
    _high = 0  # the last position this batch notified

    def _begin_batch(self) -> None:
        self._subscribed, self._high = None, 0

    def _before_commit(self) -> None:
        if self._high:  # the outbox has seen every notification up to here, for good
            self._run("UPDATE {webhook_marks} SET position = %(p)s WHERE name = 'outbox'"
                      " AND position < %(p)s", {"p": self._high})

    def subscribed(self, sub_id: str, tenant: str, url: str, events: list[str],
                   at: datetime) -> None:
        self._subscribed = True
        self._run("INSERT INTO {webhook_subscriptions} VALUES (%(i)s, %(t)s, %(u)s, %(e)s,"
                  " %(at)s) ON CONFLICT (id) DO NOTHING",
                  {"i": sub_id, "t": tenant, "u": url, "at": self._ts(at),
                   "e": "|" + "|".join(events) + "|"})

    def unsubscribed(self, sub_id: str) -> None:
        """The subscription, its undelivered rows and its secret go."""
        params = {"i": sub_id}
        self._run("DELETE FROM {webhook_subscriptions} WHERE id = %(i)s", params)
        self._run("DELETE FROM {webhook_outbox} WHERE sub_id = %(i)s AND status <> "
                  "'delivered'", params)
        self._run("DELETE FROM {webhook_secrets} WHERE id = %(i)s", params)

    def chat_started(self, chat_id: str, tenant: str, agent: str) -> None:
        self._run("INSERT INTO {webhook_chats} VALUES (%(c)s, %(t)s, %(a)s)",
                  {"c": chat_id, "t": tenant, "a": agent})

    def tool_requested(self, chat_id: str, ref: str, name: str) -> None:
        self._run("INSERT INTO {webhook_calls} VALUES (%(c)s, %(r)s, %(n)s)"
                  " ON CONFLICT (chat_id, ref) DO NOTHING", {"c": chat_id, "r": ref, "n": name})

    def notify(self, position: int, kind: str, chat_id: str, ref: str | None,
               data: dict[str, Any], at: datetime) -> None:
        """One outbox row per subscription of the chat's tenant that wants `kind`, unless
        the outbox saw this position already (a rebuild: sent, pending or pruned)."""
        if self._subscribed is None:
            # Once per batch, and only for a batch that notifies: with no subscription (most
            # servers) its events send no statement. One made in this batch sets it.
            self._subscribed = bool(self._fetch(
                "SELECT 1 FROM {webhook_subscriptions} LIMIT 1", {}))
        if not self._subscribed:
            return
        self._high = position
        # Tenant, agent and tool are joined in the same transaction (a chat may start and
        # interrupt within one batch); the body is composed from the row when sent.
        self._run(
            "INSERT INTO {webhook_outbox} SELECT 'msg_' || %(pos)s || '_' || s.id, s.id,"
            " h.tenant, %(k)s, h.chat_id, h.agent, (SELECT name FROM {webhook_calls}"
            " WHERE chat_id = %(c)s AND ref = %(r)s), %(d)s, %(when)s,"
            " 'pending', 0, %(at)s, NULL, %(at)s FROM {webhook_subscriptions} s"
            " JOIN {webhook_chats} h ON h.tenant = s.tenant WHERE h.chat_id = %(c)s"
            " AND s.events LIKE %(like)s AND %(p)s > (SELECT position FROM {webhook_marks}"
            " WHERE name = 'outbox') ON CONFLICT (id) DO NOTHING",
            {"pos": str(position), "p": position, "k": kind, "c": chat_id, "r": ref or "",
             "at": self._ts(at), "when": _iso(at), "like": f"%|{kind}|%",
             "d": json.dumps(data, separators=(",", ":"), sort_keys=True, default=str)})

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


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


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


class WebhooksProjection(Projection[WebhooksView]):
    """Subscriptions from their events; the outbox from each notifying event."""

    name = "webhooks"
    topics = (WebhookSubscribed.TOPIC, WebhookUnsubscribed.TOPIC, ChatStarted.TOPIC,
              ToolRequested.TOPIC, *(c.TOPIC for c in NOTIFY))

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Subscriptions, chats and calls are remembered; notifying events go to the outbox."""
        e, origin = domain_event, str(domain_event.originator_id)
        if isinstance(e, WebhookSubscribed):
            self.view.subscribed(public_id(e.originator_id), e.tenant, e.url, e.events,
                                 e.timestamp)
        elif isinstance(e, WebhookUnsubscribed):
            self.view.unsubscribed(public_id(e.originator_id))
        elif isinstance(e, ChatStarted):
            self.view.chat_started(origin, e.tenant, e.agent)
        elif isinstance(e, ToolRequested):
            self.view.tool_requested(origin, e.ref, e.name)
        elif type(e) in NOTIFY:
            kind, data = NOTIFY[type(e)]
            self.view.notify(tracking.notification_id, kind, origin, getattr(e, "ref", None),
                             data(e), e.timestamp)


READ_MODEL = ReadModel(WebhooksView, WebhooksProjection)
