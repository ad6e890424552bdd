"""Chat summaries: one row per chat with its status, agent, activity and pending count."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from pydantic import BaseModel, ConfigDict

from interlock.domain.chat.events import (
    STATUS_AFTER,
    ChatEvent,
    ChatStarted,
    Interrupted,
    Responded,
    Restarted,
    TurnFinished,
    TurnRetried,
    UserMessageSent,
)
from interlock.domain.chat.fork_events import ChatForked
from interlock.domain.chat.ids import id_text
from interlock.domain.chat.state import ChatStatus
from interlock.projections.engine import cursors
from interlock.projections.engine.fold import Buffers, Held
from interlock.projections.engine.pages import Page, paginate
from interlock.projections.engine.sql import Key, ReadModel, SqlView, ViewStore, equal_filters


class ChatSummary(BaseModel):
    """One chat as the list of chats shows it."""

    model_config = ConfigDict(frozen=True)

    chat_id: str
    tenant: str
    agent: str
    status: ChatStatus
    version: int
    created_at: datetime
    last_activity: datetime
    pending_count: int


class ChatFilter(BaseModel):
    """Which chats to list."""

    model_config = ConfigDict(frozen=True)

    tenant: str | None = None
    status: ChatStatus | None = None
    agent: str | None = None


_COLUMNS = "chat_id, tenant, agent, status, version, created_at, last_activity, pending_count"
_INSERT = ("INSERT INTO {chats} VALUES (%(c)s, %(t)s, %(a)s, %(s)s, %(v)s, %(created)s,"
           " %(at)s, %(d)s)")
_TOUCH = ("UPDATE {chats} SET version = %(v)s, last_activity = %(at)s,"
          " status = COALESCE(%(s)s, status), pending_count = pending_count + %(d)s"
          " WHERE chat_id = %(c)s AND version < %(v)s")


class ChatsView(SqlView):
    """Chat summaries; a chat's changes in a batch are written once, when it commits."""

    view_name = "chats"
    tables = ("chats", "chats_activity_idx", "chats_tenant_idx", "chats_status_idx",
              "chats_agent_idx")
    ddl = (
        "CREATE TABLE IF NOT EXISTS {chats} (chat_id text PRIMARY KEY, tenant text NOT NULL,"
        " agent text NOT NULL, status text NOT NULL, version bigint NOT NULL,"
        " created_at {ts} NOT NULL, last_activity {ts} NOT NULL, pending_count int NOT NULL)",
        "CREATE INDEX IF NOT EXISTS {chats_activity_idx} ON {chats} (last_activity, chat_id)",
        "CREATE INDEX IF NOT EXISTS {chats_tenant_idx} ON {chats} (tenant, last_activity, chat_id)",
        "CREATE INDEX IF NOT EXISTS {chats_status_idx} ON {chats} (status, last_activity, chat_id)",
        "CREATE INDEX IF NOT EXISTS {chats_agent_idx} ON {chats} (agent, last_activity, chat_id)",
    )
    dump_sql = f"SELECT {_COLUMNS} FROM {{chats}} ORDER BY chat_id"

    _touches: dict[str, dict[str, Any]]

    def __init__(self, store: ViewStore, read_model: ReadModel) -> None:
        super().__init__(store, read_model)
        # Chats started in this batch, held (engine/fold.py): their later events of the
        # batch fold into the row instead of an UPDATE.
        self._started = Held(_INSERT)
        self._held = Buffers(self._run_many, self._started)

    def _begin_batch(self) -> None:
        self._touches = {}
        self._held.clear()

    def chat_started(
        self, chat_id: str, tenant: str, agent: str, version: int, at: datetime
    ) -> None:
        self._held.insert(self._started, (chat_id,), {
            "c": chat_id, "t": tenant, "a": agent, "s": "idle", "v": version,
            "created": self._ts(at), "at": self._ts(at), "d": 0})

    def status_changed(self, chat_id: str, status: ChatStatus | None, pending_delta: int) -> None:
        """Folded into the chat's one UPDATE of the batch: the last status, the deltas' sum."""
        touch = self._touch(chat_id)
        if status is not None:
            touch["s"] = status
        touch["d"] += pending_delta

    def touched(self, chat_id: str, version: int, at: datetime) -> None:
        # Only a chat's latest event in the batch matters: one UPDATE per chat per batch.
        self._touch(chat_id).update(v=version, at=self._ts(at))

    def _touch(self, chat_id: str) -> dict[str, Any]:
        """The chat's held row, or its pending UPDATE of this batch (no status change, no
        delta yet): either takes the last version and status, and the deltas' sum."""
        started = self._started.rows.get((chat_id,))
        if started is not None:
            return started
        return self._touches.setdefault(chat_id, {"c": chat_id, "s": None, "d": 0})

    def _before_commit(self) -> None:
        self._held.flush()
        touches, self._touches = list(self._touches.values()), {}
        self._run_many(_TOUCH, touches)

    def page(self, f: ChatFilter, limit: int, cursor: str | None) -> Page[ChatSummary]:
        """Newest activity first."""
        rows = self.query(f, limit + 1, cursors.decode(cursor, str))
        return paginate(rows, limit, lambda r: (r.last_activity, r.chat_id))

    def query(self, f: ChatFilter, limit: int, after: Key | None) -> list[ChatSummary]:
        """Up to `limit` rows after the keyset `after`."""
        conds, params = equal_filters(f.model_dump(), ("tenant", "status", "agent"))
        if after is not None:
            conds.append("(last_activity, chat_id) < (%(k0)s, %(k1)s)")
            params.update(k0=self._ts(after[0]), k1=after[1])
        rows = self._select(f"SELECT {_COLUMNS} FROM {{chats}}", conds,
                            "last_activity DESC, chat_id DESC", params, limit)
        return [ChatSummary(**{**r, "created_at": self._load_ts(r["created_at"]),
                               "last_activity": self._load_ts(r["last_activity"])})
                for r in rows]


class ChatsProjection(Projection[ChatsView]):
    """Writes the summaries: every event is activity; some change status or pending count."""

    name = "chats"

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Every event is activity."""
        self._touch(domain_event)

    def _touch(self, e: ChatEvent) -> None:
        self.view.touched(id_text(e.originator_id), e.originator_version, e.timestamp)

    def _status(self, e: ChatEvent, status: ChatStatus | None, pending_delta: int = 0) -> None:
        self.view.status_changed(id_text(e.originator_id), status, pending_delta)
        self._touch(e)

    @process_event.register
    def _started(self, e: ChatStarted, tracking: Tracking) -> None:
        self.view.chat_started(id_text(e.originator_id), e.tenant, e.agent, e.originator_version,
                               e.timestamp)

    @process_event.register
    def _message(self, e: UserMessageSent, tracking: Tracking) -> None:
        self._status(e, "running")

    @process_event.register
    def _retried(self, e: TurnRetried, tracking: Tracking) -> None:
        self._status(e, "running")

    @process_event.register
    def _interrupted(self, e: Interrupted, tracking: Tracking) -> None:
        self._status(e, None, 1)

    @process_event.register
    def _responded(self, e: Responded, tracking: Tracking) -> None:
        self._status(e, "running", -1)

    @process_event.register
    def _restarted(self, e: Restarted, tracking: Tracking) -> None:
        self._status(e, "running", -1)

    @process_event.register
    def _finished(self, e: TurnFinished, tracking: Tracking) -> None:
        self._status(e, STATUS_AFTER[e.reason])


    @process_event.register
    def _forked(self, e: ChatForked, tracking: Tracking) -> None:
        """A fork starts where its source was: its status, its pending tool interrupts."""
        h = e.begun()
        calls = [] if h is None else [h.calls[ref] for ref in h.batch]
        pending = sum(1 for c in calls if c.status == "interrupted" and c.approval is None)
        self._status(e, None if h is None else h.status, pending)


READ_MODEL = ReadModel(ChatsView, ChatsProjection)
