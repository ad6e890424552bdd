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
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal, get_args

from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection

from interlock.domain.chat.approval_events import (
    ApprovalRequested,
    ApprovalVoted,
    InterruptExpired,
    InterruptWithdrawn,
)
from interlock.domain.chat.canonical import wire_time
from interlock.domain.chat.events import (
    ChatStarted,
    Interrupted,
    Responded,
    Restarted,
    ToolRequested,
    TurnFinished,
)
from interlock.domain.chat.ids import id_text
from interlock.domain.webhooks import WebhookSubscribed, WebhookUnsubscribed, public_id
from interlock.projections.engine.fold import JoinedView
from interlock.projections.engine.sql import ReadModel, ViewStore
from interlock.projections.views.webhook_outbox import (
    Delivery,
    DeliveryStatus,
    Due,
    Subscription,
    WebhookOutbox,
)

EventType = Literal["interrupt.pending", "interrupt.decided", "interrupt.expired",
                    "turn.finished"]
EVENT_TYPES: tuple[EventType, ...] = get_args(EventType)
__all__ = ["EVENT_TYPES", "NOTIFY", "READ_MODEL", "Delivery", "DeliveryStatus", "Due",
           "EventType", "Subscription", "WebhooksProjection", "WebhooksView"]

def _iso(at: datetime) -> str:
    return wire_time(at)


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


REBUILT = ("webhook_subscriptions", "webhook_chats", "webhook_calls")
KEPT = ("webhook_outbox", "webhook_due_idx", "webhook_chat_idx", "webhook_secrets",
        "webhook_marks")
LEGACY = "webhook_subs"  # subscriptions before they were events: migrated, then dropped


class WebhooksView(WebhookOutbox, JoinedView):
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

    # Chats and calls started in this batch are held until a notification is joined from
    # them or the batch ends (engine/fold.py): with no subscription, one executemany each.
    lookup_inserts = ("INSERT INTO {webhook_chats} VALUES (%(c)s, %(t)s, %(a)s)",
                      "INSERT INTO {webhook_calls} VALUES (%(c)s, %(r)s, %(n)s)"
                      " ON CONFLICT (chat_id, ref) DO NOTHING")

    # -- written by the projection, inside its batches --------------------------------------

    _subscribed: bool | None = None  # read at a batch's first notification
    _high = 0  # the last position this batch notified
    # Whether any subscription exists at a position, as the last batch this view wrote
    # left it. The subscriptions are a function of the log up to the position (only this
    # projection writes them), so the next batch that starts there reuses it instead of
    # reading it again; a batch that starts elsewhere (another runner, a rebuild, a retry)
    # reads it, and one refused or rolled back commits nothing under the position it names.
    _known: tuple[int, bool] | None = None
    _unsure = False  # an unsubscription in this batch: whether any remain is not known

    def _begin_batch(self) -> None:
        super()._begin_batch()
        known = self._known
        self._subscribed = known[1] if known is not None and known[0] == self._start else None
        self._high, self._unsure = 0, False

    def _before_commit(self) -> None:
        super()._before_commit()
        if self._high:  # the outbox has seen every notification up to here, for good
            self._run("UPDATE {webhook_marks} SET position = %(p)s WHERE name = 'outbox'"
                      " AND position < %(p)s", {"p": self._high})
        subscribed = None if self._unsure else self._subscribed
        self._known = None if subscribed is None else (self._upto, subscribed)

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
        self._unsure = True
        self._run("DELETE FROM {webhook_subscriptions} WHERE id = %(i)s", params)
        self._run("DELETE FROM {webhook_outbox} WHERE sub_id = %(i)s AND status <> "
                  "'delivered'", params)
        self._run("DELETE FROM {webhook_secrets} WHERE id = %(i)s", params)

    def chat_started(self, chat_id: str, tenant: str, agent: str) -> None:
        self.lookups.chat_started(chat_id, {"c": chat_id, "t": tenant, "a": agent})

    def tool_requested(self, chat_id: str, ref: str, name: str) -> None:
        calls = self.lookups.calls.rows
        if (chat_id, ref) not in calls:  # the first is kept, as ON CONFLICT does
            calls[chat_id, ref] = {"c": chat_id, "r": ref, "n": name}

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
        self.lookups.flush()  # the row is joined from the chat and the call
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


class WebhooksProjection(Projection[WebhooksView]):
    """Subscriptions from their events; the outbox from each notifying event."""

    name = "webhooks"
    topics = (WebhookSubscribed.TOPIC, WebhookUnsubscribed.TOPIC, ChatStarted.TOPIC,
              ToolRequested.TOPIC, *(c.TOPIC for c in NOTIFY))

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Subscriptions, chats and calls are remembered; notifying events go to the outbox."""
        e, origin = domain_event, id_text(domain_event.originator_id)
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
