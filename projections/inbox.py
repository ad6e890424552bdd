"""The approvers' inbox: interrupts awaiting a decision, across all chats."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from pydantic import BaseModel, ConfigDict

from interlock.domain.events import (
    ChatStarted,
    Interrupted,
    Responded,
    Restarted,
    ToolRequested,
    UserMessageSent,
)
from interlock.projections import cursors
from interlock.projections.pages import Page, paginate
from interlock.projections.sql import Key, ReadModel, Row, SqlView, equal_filters


class InboxRow(BaseModel):
    """A pending interrupt awaiting a decision."""

    model_config = ConfigDict(frozen=True)

    chat_id: str
    tenant: str
    agent: str
    ref: str
    tool: str
    input: Any = None
    metadata: Any = None  # the interrupt payload: any JSON value
    requested_at: datetime
    requested_by: str | None = None


class InboxFilter(BaseModel):
    """Which pending interrupts to list."""

    model_config = ConfigDict(frozen=True)

    tenant: str | None = None
    agent: str | None = None
    tool: str | None = None
    chat_id: str | None = None
    older_than: datetime | None = None
    newest_first: bool = False


_COLUMNS = "chat_id, tenant, agent, ref, tool, input, metadata, requested_at, requested_by"


class InboxView(SqlView):
    """Pending interrupts, plus the chats and calls they are joined from."""

    view_name = "inbox"
    tables = ("inbox", "inbox_chats", "inbox_calls", "inbox_time_idx", "inbox_tenant_idx",
              "inbox_agent_idx", "inbox_tool_idx")
    ddl = (
        "CREATE TABLE IF NOT EXISTS {inbox_chats} (chat_id text PRIMARY KEY, tenant text NOT NULL,"
        " agent text NOT NULL, turn_by text)",
        "CREATE TABLE IF NOT EXISTS {inbox_calls} (chat_id text NOT NULL, ref text NOT NULL,"
        " name text NOT NULL, input {json}, requested_by text, PRIMARY KEY (chat_id, ref))",
        "CREATE TABLE IF NOT EXISTS {inbox} (chat_id text NOT NULL, ref text NOT NULL,"
        " tenant text NOT NULL, agent text NOT NULL, tool text NOT NULL, input {json},"
        " metadata {json}, requested_at {ts} NOT NULL, requested_by text,"
        " PRIMARY KEY (chat_id, ref))",
        "CREATE INDEX IF NOT EXISTS {inbox_time_idx} ON {inbox} (requested_at, chat_id, ref)",
        "CREATE INDEX IF NOT EXISTS {inbox_tenant_idx} ON {inbox}"
        " (tenant, requested_at, chat_id, ref)",
        "CREATE INDEX IF NOT EXISTS {inbox_agent_idx} ON {inbox}"
        " (agent, requested_at, chat_id, ref)",
        "CREATE INDEX IF NOT EXISTS {inbox_tool_idx} ON {inbox} (tool, requested_at, chat_id, ref)",
    )
    dump_sql = f"SELECT {_COLUMNS} FROM {{inbox}} ORDER BY chat_id, ref"

    def chat_started(self, chat_id: str, tenant: str, agent: str) -> None:
        self._run("INSERT INTO {inbox_chats} VALUES (%(c)s, %(t)s, %(a)s, NULL)",
                  {"c": chat_id, "t": tenant, "a": agent})

    def message_sent(self, chat_id: str, actor: str) -> None:
        self._run("UPDATE {inbox_chats} SET turn_by = %(a)s WHERE chat_id = %(c)s",
                  {"c": chat_id, "a": actor})

    def tool_requested(self, chat_id: str, ref: str, name: str, input: Any) -> None:
        self._run("INSERT INTO {inbox_calls} SELECT chat_id, %(r)s, %(n)s, %(i)s, turn_by"
                  " FROM {inbox_chats} WHERE chat_id = %(c)s",
                  {"c": chat_id, "r": ref, "n": name, "i": self._json(input)})

    def interrupted(
        self, chat_id: str, ref: str, metadata: Any, at: datetime
    ) -> None:
        self._run(
            "INSERT INTO {inbox} SELECT c.chat_id, c.ref, h.tenant, h.agent, c.name, c.input,"
            " %(m)s, %(at)s, c.requested_by FROM {inbox_calls} c JOIN {inbox_chats} h"
            " ON h.chat_id = c.chat_id WHERE c.chat_id = %(c)s AND c.ref = %(r)s",
            {"c": chat_id, "r": ref, "m": self._json(metadata), "at": self._ts(at)})

    def input_replaced(self, chat_id: str, ref: str, input: Any) -> None:
        self._run("UPDATE {inbox_calls} SET input = %(i)s WHERE chat_id = %(c)s AND ref = %(r)s",
                  {"c": chat_id, "r": ref, "i": self._json(input)})

    def decided(self, chat_id: str, ref: str) -> None:
        self._run("DELETE FROM {inbox} WHERE chat_id = %(c)s AND ref = %(r)s",
                  {"c": chat_id, "r": ref})

    def page(self, f: InboxFilter, limit: int, cursor: str | None) -> Page[InboxRow]:
        """Oldest request first, unless `f.newest_first`."""
        rows = self.query(f, limit + 1, cursors.decode(cursor, str, str))
        return paginate(rows, limit, lambda r: (r.requested_at, r.chat_id, r.ref))

    def query(self, f: InboxFilter, limit: int, after: Key | None) -> list[InboxRow]:
        """Up to `limit` rows after the keyset `after`."""
        conds, params = equal_filters(f.model_dump(), ("tenant", "agent", "tool", "chat_id"))
        if f.older_than is not None:
            conds.append("requested_at < %(older)s")
            params["older"] = self._ts(f.older_than)
        if after is not None:
            beyond = "<" if f.newest_first else ">"
            conds.append(f"(requested_at, chat_id, ref) {beyond} (%(k0)s, %(k1)s, %(k2)s)")
            params.update(k0=self._ts(after[0]), k1=after[1], k2=after[2])
        order = ("requested_at DESC, chat_id DESC, ref DESC" if f.newest_first
                 else "requested_at, chat_id, ref")
        rows = self._select(f"SELECT {_COLUMNS} FROM {{inbox}}", conds, order, params, limit)
        return [self._row(r) for r in rows]

    def _row(self, r: Row) -> InboxRow:
        return InboxRow(**{**r, "input": self._load_json(r["input"]),
                           "metadata": self._load_json(r["metadata"]),
                           "requested_at": self._load_ts(r["requested_at"])})


class InboxProjection(Projection[InboxView]):
    """Writes the inbox: an interrupt enters it, a decision removes it."""

    name = "inbox"
    topics = tuple(c.TOPIC for c in (ChatStarted, UserMessageSent, ToolRequested, Interrupted,
                                     Responded, Restarted))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Other events do not change the inbox."""

    @process_event.register
    def _started(self, e: ChatStarted, tracking: Tracking) -> None:
        self.view.chat_started(str(e.originator_id), e.tenant, e.agent)

    @process_event.register
    def _message(self, e: UserMessageSent, tracking: Tracking) -> None:
        self.view.message_sent(str(e.originator_id), e.actor)

    @process_event.register
    def _requested(self, e: ToolRequested, tracking: Tracking) -> None:
        self.view.tool_requested(str(e.originator_id), e.ref, e.name, e.input)

    @process_event.register
    def _interrupted(self, e: Interrupted, tracking: Tracking) -> None:
        self.view.interrupted(str(e.originator_id), e.ref, e.metadata, e.timestamp)

    @process_event.register
    def _responded(self, e: Responded, tracking: Tracking) -> None:
        self.view.decided(str(e.originator_id), e.ref)

    @process_event.register
    def _restarted(self, e: Restarted, tracking: Tracking) -> None:
        self.view.decided(str(e.originator_id), e.ref)
        if e.replaced_input_sha256 is not None:
            self.view.input_replaced(str(e.originator_id), e.ref, e.replace_input)


READ_MODEL = ReadModel(InboxView, InboxProjection)
