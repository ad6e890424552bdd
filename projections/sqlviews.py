"""The SQL shared by the PostgreSQL and SQLite views: tables, writes and keyset queries.

Statements are templates: `{name}` is a table or index of the view (the backend quotes
and qualifies it), `{json}` and `{ts}` are column types, `%(x)s` are parameters. The
backends compose them (PostgreSQL with `psycopg.sql`), never with caller input.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

from interlock.projections.interface import (
    ChatFilter,
    ChatSummary,
    DecisionFilter,
    DecisionRow,
    DecisionStats,
    InboxFilter,
    InboxRow,
)
from interlock.projections.views import ChatsView, Decided, DecisionsView, InboxView, Key, View

Row = Mapping[str, Any]


class SqlView(View):
    """A view whose SQL is written once and run by a backend (PostgreSQL, SQLite)."""

    tables: ClassVar[tuple[str, ...]]  # short names; the backend prefixes them
    ddl: ClassVar[tuple[str, ...]]
    dump_sql: ClassVar[str]

    @abstractmethod
    def _run(self, template: str, params: Mapping[str, Any]) -> None:
        """Execute a write inside the current batch."""

    @abstractmethod
    def _fetch(self, template: str, params: Mapping[str, Any]) -> list[Row]: ...

    @abstractmethod
    def _json(self, value: Any) -> Any: ...

    @abstractmethod
    def _ts(self, value: datetime) -> Any: ...

    @abstractmethod
    def _load_json(self, value: Any) -> Any: ...

    @abstractmethod
    def _load_ts(self, value: Any) -> datetime: ...

    def _begin_batch(self) -> None:
        """Reset what the batch buffers."""

    def _before_commit(self) -> None:
        """Flush writes buffered during the batch."""

    def dump(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._fetch(self.dump_sql, {})]

    def _select(
        self, base: str, conds: list[str], order: str, params: dict[str, Any], limit: int
    ) -> list[Row]:
        where = " WHERE " + " AND ".join(conds) if conds else ""
        params["limit"] = limit
        return self._fetch(f"{base}{where} ORDER BY {order} LIMIT %(limit)s", params)


def _equal_filters(
    f: Mapping[str, Any], columns: Sequence[str]
) -> tuple[list[str], dict[str, Any]]:
    conds = [f"{c} = %({c})s" for c in columns if f.get(c) is not None]
    return conds, {c: f[c] for c in columns if f.get(c) is not None}


class SqlInboxView(SqlView, InboxView):
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
    _columns = "chat_id, tenant, agent, ref, tool, input, metadata, requested_at, requested_by"
    dump_sql = f"SELECT {_columns} FROM {{inbox}} ORDER BY chat_id, ref"

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

    def query(self, f: InboxFilter, limit: int, after: Key | None) -> list[InboxRow]:
        conds, params = _equal_filters(f.model_dump(), ("tenant", "agent", "tool", "chat_id"))
        if f.older_than is not None:
            conds.append("requested_at < %(older)s")
            params["older"] = self._ts(f.older_than)
        if after is not None:
            conds.append("(requested_at, chat_id, ref) > (%(k0)s, %(k1)s, %(k2)s)")
            params.update(k0=self._ts(after[0]), k1=after[1], k2=after[2])
        rows = self._select(f"SELECT {self._columns} FROM {{inbox}}", conds,
                            "requested_at, chat_id, ref", params, limit)
        return [self._inbox_row(r) for r in rows]

    def _inbox_row(self, r: Row) -> InboxRow:
        return InboxRow(**{**r, "input": self._load_json(r["input"]),
                           "metadata": self._load_json(r["metadata"]),
                           "requested_at": self._load_ts(r["requested_at"])})


class SqlDecisionsView(SqlView, DecisionsView):
    tables = ("decisions", "decision_chats", "decision_calls", "decisions_time_idx",
              "decisions_tenant_idx", "decisions_tool_idx", "decisions_actor_idx",
              "decisions_chat_idx")
    ddl = (
        "CREATE TABLE IF NOT EXISTS {decision_chats} (chat_id text PRIMARY KEY,"
        " tenant text NOT NULL, agent text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS {decision_calls} (chat_id text NOT NULL, ref text NOT NULL,"
        " name text NOT NULL, input {json}, interrupted_at {ts}, PRIMARY KEY (chat_id, ref))",
        "CREATE TABLE IF NOT EXISTS {decisions} (chat_id text NOT NULL, version bigint NOT NULL,"
        " ref text NOT NULL, tenant text NOT NULL, agent text NOT NULL, tool text NOT NULL,"
        " kind text NOT NULL, original_input {json}, replaced_input {json}, output {json},"
        " resumed_metadata {json}, actor text NOT NULL, input_sha256 text NOT NULL,"
        " requested_at {ts} NOT NULL, decided_at {ts} NOT NULL, PRIMARY KEY (chat_id, version))",
        "CREATE INDEX IF NOT EXISTS {decisions_time_idx} ON {decisions}"
        " (decided_at, chat_id, version)",
        "CREATE INDEX IF NOT EXISTS {decisions_tenant_idx} ON {decisions}"
        " (tenant, decided_at, chat_id, version)",
        "CREATE INDEX IF NOT EXISTS {decisions_tool_idx} ON {decisions}"
        " (tool, decided_at, chat_id, version)",
        "CREATE INDEX IF NOT EXISTS {decisions_actor_idx} ON {decisions}"
        " (actor, decided_at, chat_id, version)",
        "CREATE INDEX IF NOT EXISTS {decisions_chat_idx} ON {decisions}"
        " (chat_id, decided_at, version)",
    )
    _columns = ("chat_id, tenant, agent, ref, tool, kind, original_input, replaced_input, output,"
                " resumed_metadata, actor, input_sha256, requested_at, decided_at, version")
    dump_sql = f"SELECT {_columns} FROM {{decisions}} ORDER BY chat_id, version"
    _filters = ("tenant", "tool", "actor", "chat_id")

    def chat_started(self, chat_id: str, tenant: str, agent: str) -> None:
        self._run("INSERT INTO {decision_chats} VALUES (%(c)s, %(t)s, %(a)s)",
                  {"c": chat_id, "t": tenant, "a": agent})

    def tool_requested(self, chat_id: str, ref: str, name: str, input: Any) -> None:
        self._run("INSERT INTO {decision_calls} VALUES (%(c)s, %(r)s, %(n)s, %(i)s, NULL)",
                  {"c": chat_id, "r": ref, "n": name, "i": self._json(input)})

    def interrupted(self, chat_id: str, ref: str, at: datetime) -> None:
        self._run("UPDATE {decision_calls} SET interrupted_at = %(at)s"
                  " WHERE chat_id = %(c)s AND ref = %(r)s",
                  {"c": chat_id, "r": ref, "at": self._ts(at)})

    def input_replaced(self, chat_id: str, ref: str, input: Any) -> None:
        self._run("UPDATE {decision_calls} SET input = %(i)s WHERE chat_id = %(c)s"
                  " AND ref = %(r)s", {"c": chat_id, "r": ref, "i": self._json(input)})

    def decided(self, d: Decided) -> None:
        original = "c.input" if d.kind == "respond" else "%(oi)s"
        self._run(
            "INSERT INTO {decisions} SELECT c.chat_id, %(v)s, c.ref, h.tenant, h.agent, c.name,"
            f" %(k)s, {original}, %(ri)s, %(o)s, %(rm)s, %(a)s, %(sha)s, c.interrupted_at, %(at)s"
            " FROM {decision_calls} c JOIN {decision_chats} h ON h.chat_id = c.chat_id"
            " WHERE c.chat_id = %(c)s AND c.ref = %(r)s",
            {"c": d.chat_id, "r": d.ref, "v": d.version, "k": d.kind,
             "oi": self._json(d.original_input), "ri": self._json(d.replaced_input),
             "o": self._json(d.output), "rm": self._json(d.resumed_metadata), "a": d.actor,
             "sha": d.input_sha256, "at": self._ts(d.decided_at)})

    def _where(self, f: DecisionFilter) -> tuple[list[str], dict[str, Any]]:
        conds, params = _equal_filters(f.model_dump(), self._filters)
        if f.since is not None:
            conds.append("decided_at >= %(since)s")
            params["since"] = self._ts(f.since)
        if f.until is not None:
            conds.append("decided_at < %(until)s")
            params["until"] = self._ts(f.until)
        return conds, params

    def query(self, f: DecisionFilter, limit: int, after: Key | None) -> list[DecisionRow]:
        conds, params = self._where(f)
        if after is not None:
            conds.append("(decided_at, chat_id, version) < (%(k0)s, %(k1)s, %(k2)s)")
            params.update(k0=self._ts(after[0]), k1=after[1], k2=after[2])
        rows = self._select(f"SELECT {self._columns} FROM {{decisions}}", conds,
                            "decided_at DESC, chat_id DESC, version DESC", params, limit)
        return [self._decision_row(r) for r in rows]

    def _decision_row(self, r: Row) -> DecisionRow:
        loaded = {k: self._load_json(r[k]) for k in
                  ("original_input", "replaced_input", "output", "resumed_metadata")}
        return DecisionRow(**{**r, **loaded, "requested_at": self._load_ts(r["requested_at"]),
                              "decided_at": self._load_ts(r["decided_at"])})

    def stats(self, f: DecisionFilter) -> DecisionStats:
        conds, params = self._where(f)
        where = " WHERE " + " AND ".join(conds) if conds else ""
        by_tool = self._counts("tool", where, params)
        by_actor = self._counts("actor", where, params)
        p50, p95 = self._percentiles(where, params)
        return DecisionStats(total=sum(by_tool.values()), by_tool=by_tool, by_actor=by_actor,
                             p50_seconds=p50, p95_seconds=p95)

    def _counts(self, column: str, where: str, params: dict[str, Any]) -> dict[str, int]:
        rows = self._fetch(f"SELECT {column} AS k, count(*) AS n FROM {{decisions}}{where}"
                           f" GROUP BY {column} ORDER BY {column}", params)
        return {r["k"]: int(r["n"]) for r in rows}

    @abstractmethod
    def _percentiles(self, where: str, params: dict[str, Any]) -> tuple[float | None, float | None]:
        """Time-to-decision p50 and p95 in seconds (continuous percentiles)."""


class SqlChatsView(SqlView, ChatsView):
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
    _columns = "chat_id, tenant, agent, status, version, created_at, last_activity, pending_count"
    dump_sql = f"SELECT {_columns} FROM {{chats}} ORDER BY chat_id"
    _touch_sql = ("UPDATE {chats} SET version = %(v)s, last_activity = %(at)s"
                  " WHERE chat_id = %(c)s AND version < %(v)s")

    _touches: dict[str, dict[str, Any]]

    def _begin_batch(self) -> None:
        self._touches = {}

    def chat_started(
        self, chat_id: str, tenant: str, agent: str, version: int, at: datetime
    ) -> None:
        self._run("INSERT INTO {chats} VALUES (%(c)s, %(t)s, %(a)s, 'idle', %(v)s, %(at)s,"
                  " %(at)s, 0)",
                  {"c": chat_id, "t": tenant, "a": agent, "v": version, "at": self._ts(at)})

    def status_changed(self, chat_id: str, status: str | None, pending_delta: int) -> None:
        self._run("UPDATE {chats} SET status = COALESCE(%(s)s, status),"
                  " pending_count = pending_count + %(d)s WHERE chat_id = %(c)s",
                  {"c": chat_id, "s": status, "d": pending_delta})

    def touched(self, chat_id: str, version: int, at: datetime) -> None:
        # Only a chat's latest event in the batch matters: one UPDATE per chat per batch.
        self._touches[chat_id] = {"c": chat_id, "v": version, "at": self._ts(at)}

    def _before_commit(self) -> None:
        touches, self._touches = list(self._touches.values()), {}
        self._run_many(self._touch_sql, touches)

    @abstractmethod
    def _run_many(self, template: str, params: Sequence[Mapping[str, Any]]) -> None: ...

    def query(self, f: ChatFilter, limit: int, after: Key | None) -> list[ChatSummary]:
        conds, params = _equal_filters(f.model_dump(), ("tenant", "status", "agent"))
        if after is not None:
            conds.append("(last_activity, chat_id) < (%(k0)s, %(k1)s)")
            params.update(k0=self._ts(after[0]), k1=after[1])
        rows = self._select(f"SELECT {self._columns} FROM {{chats}}", conds,
                            "last_activity DESC, chat_id DESC", params, limit)
        return [ChatSummary(**{**r, "created_at": self._load_ts(r["created_at"]),
                               "last_activity": self._load_ts(r["last_activity"])})
                for r in rows]
