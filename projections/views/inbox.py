"""The approvers' inbox: interrupts awaiting a decision, across all chats."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from pydantic import BaseModel, ConfigDict

from interlock.domain.chat.approval_events import (
    ApprovalEscalated,
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
    TurnRetried,
    UserMessageSent,
)
from interlock.domain.chat.fork_events import ChatForked
from interlock.domain.chat.ids import id_text
from interlock.domain.chat.policies import ApprovalState, normalise_id
from interlock.domain.chat.rules import AWAITS_AGENT, barred_voters
from interlock.domain.chat.stages import CurrentStage
from interlock.domain.chat.state import ToolCall
from interlock.projections.engine import cursors
from interlock.projections.engine.fold import JoinedView
from interlock.projections.engine.pages import Page, paginate
from interlock.projections.engine.sql import (
    Key,
    ReadModel,
    Row,
    ViewStore,
    equal_filters,
    where,
)


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
    approval: dict[str, Any] | None = None  # a held call: terms, votes so far, escalated
    expires_at: datetime | None = None
    stage: CurrentStage | None = None  # a staged policy's call: the stage it waits in


class InboxFilter(BaseModel):
    """Which pending interrupts to list."""

    model_config = ConfigDict(frozen=True)

    tenant: str | None = None
    agent: str | None = None
    tool: str | None = None
    chat_id: str | None = None
    older_than: datetime | None = None
    newest_first: bool = False
    decidable_by: Decidable | None = None  # only what this principal may decide now
    partial: bool = False  # agent and tool match any part of the name, whatever the case


@dataclass(frozen=True)
class Decidable:
    """A principal as the inbox filters for it: normalised id, roles and groups."""

    id: str
    roles: frozenset[str]
    groups: frozenset[str]


_COLUMNS = ("chat_id, tenant, agent, ref, tool, input, metadata, requested_at, requested_by,"
            " approval, expires_at")
# `deciders` lists ",role:x,group:y," and `voters` ",id," (normalised) so LIKE can filter.


def _like(text: str) -> str:
    """`text` matched literally inside a LIKE pattern (`!` escapes)."""
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


class InboxView(JoinedView):
    """Pending interrupts, plus the chats and calls they are joined from."""

    view_name = "inbox"
    tables = ("inbox", "inbox_chats", "inbox_calls", "inbox_time_idx", "inbox_tenant_idx",
              "inbox_agent_idx", "inbox_tool_idx", "inbox_due_idx", "inbox_awaiting")
    ddl = (
        "CREATE TABLE IF NOT EXISTS {inbox_chats} (chat_id text PRIMARY KEY, tenant text NOT NULL,"
        " agent text NOT NULL, turn_by text)",
        "CREATE TABLE IF NOT EXISTS {inbox_calls} (chat_id text NOT NULL, ref text NOT NULL,"
        " name text NOT NULL, input {json}, requested_by text, PRIMARY KEY (chat_id, ref))",
        "CREATE TABLE IF NOT EXISTS {inbox} (chat_id text NOT NULL, ref text NOT NULL,"
        " tenant text NOT NULL, agent text NOT NULL, tool text NOT NULL, input {json},"
        " metadata {json}, requested_at {ts} NOT NULL, requested_by text,"
        " approval {json}, expires_at {ts}, due_at {ts}, deciders text NOT NULL DEFAULT '',"
        " voters text NOT NULL DEFAULT ',', PRIMARY KEY (chat_id, ref))",
        "CREATE INDEX IF NOT EXISTS {inbox_time_idx} ON {inbox} (requested_at, chat_id, ref)",
        "CREATE INDEX IF NOT EXISTS {inbox_tenant_idx} ON {inbox}"
        " (tenant, requested_at, chat_id, ref)",
        "CREATE INDEX IF NOT EXISTS {inbox_agent_idx} ON {inbox}"
        " (agent, requested_at, chat_id, ref)",
        "CREATE INDEX IF NOT EXISTS {inbox_tool_idx} ON {inbox} (tool, requested_at, chat_id, ref)",
        # The sweeper's query: what is due (expiry or escalation) soonest first.
        "CREATE INDEX IF NOT EXISTS {inbox_due_idx} ON {inbox} (due_at, chat_id, ref)"
        " WHERE due_at IS NOT NULL",
        # Chats whose turn a sweeper without their agent ended: a process with it continues.
        "CREATE TABLE IF NOT EXISTS {inbox_awaiting} (chat_id text PRIMARY KEY,"
        " agent text NOT NULL, since {ts} NOT NULL)",
    )
    dump_sql = f"SELECT {_COLUMNS} FROM {{inbox}} ORDER BY chat_id, ref"
    # Chats and calls started in this batch are held until a statement reads or changes
    # them in SQL or the batch ends (engine/fold.py): a chat's first turn folds in, and
    # a held call reads its requester (the turn) when written: a new turn flushes it.
    lookup_inserts = ("INSERT INTO {inbox_chats} VALUES (%(c)s, %(t)s, %(a)s, %(by)s)",
                      "INSERT INTO {inbox_calls} SELECT chat_id, %(r)s, %(n)s, %(i)s,"
                      " turn_by FROM {inbox_chats} WHERE chat_id = %(c)s")

    def chat_started(self, chat_id: str, tenant: str, agent: str) -> None:
        self.lookups.chat_started(chat_id, {"c": chat_id, "t": tenant, "a": agent, "by": None})

    def message_sent(self, chat_id: str, actor: str) -> None:
        """The chat's turn is `actor`'s, and it no longer waits for its agent."""
        if self.lookups.calls.holds_chat(chat_id):  # its held calls read the turn they
            self.lookups.flush()  # were asked in (other chats' calls read theirs)
        # A chat held since it started this batch has no row waiting for its agent: one is
        # written only from its row (awaits_agent), which flushes it.
        if self.lookups.fold_chat(chat_id, by=actor):
            return
        self._run("UPDATE {inbox_chats} SET turn_by = %(a)s WHERE chat_id = %(c)s",
                  {"c": chat_id, "a": actor})
        self.turn_moved_on(chat_id)

    def awaits_agent(self, chat_id: str, at: datetime) -> None:
        """The chat's turn ended for want of its agent after an expiry or a withdrawal."""
        self.lookups.flush()
        self._run("INSERT INTO {inbox_awaiting} SELECT chat_id, agent, %(at)s FROM {inbox_chats}"
                  " WHERE chat_id = %(c)s ON CONFLICT (chat_id) DO NOTHING",
                  {"c": chat_id, "at": self._ts(at)})

    def turn_moved_on(self, chat_id: str) -> None:
        if (chat_id,) in self.lookups.chats.rows:  # see message_sent
            return
        self._run("DELETE FROM {inbox_awaiting} WHERE chat_id = %(c)s", {"c": chat_id})

    def awaiting(self, agents: list[str], limit: int) -> list[str]:
        """Chats of these agents whose turn waits to go on after an expiry, oldest first."""
        if not agents:
            return []
        names = {f"a{i}": a for i, a in enumerate(agents)}
        rows = self._fetch(
            "SELECT chat_id FROM {inbox_awaiting} WHERE agent IN ("
            + ", ".join(f"%({k})s" for k in names) + ") ORDER BY since, chat_id LIMIT %(limit)s",
            {**names, "limit": limit})
        return [r["chat_id"] for r in rows]

    def call_copied(self, chat_id: str, call: ToolCall, at: datetime) -> None:
        """A fork's pending call, as its history brought it across (pending or held)."""
        self.lookups.flush()
        self._run("INSERT INTO {inbox_calls} VALUES (%(c)s, %(r)s, %(n)s, %(i)s, %(by)s)",
                  {"c": chat_id, "r": call.ref, "n": call.name, "i": self._json(call.input),
                   "by": call.requested_by})
        when = call.interrupted_at or at
        if call.approval is None:
            self.interrupted(chat_id, call.ref, call.interrupt, when)
            return
        self.interrupted(chat_id, call.ref, {
            "approval": call.approval.terms.model_dump(mode="json")}, when)
        self.approval_changed(chat_id, call.ref, call.approval, None)

    def tool_requested(self, chat_id: str, ref: str, name: str, input: Any) -> None:
        self.lookups.tool_requested(
            chat_id, ref, {"c": chat_id, "r": ref, "n": name, "i": self._json(input)})

    def interrupted(
        self, chat_id: str, ref: str, metadata: Any, at: datetime
    ) -> None:
        self.lookups.flush()  # the row is joined from its call and chat
        self._run(
            "INSERT INTO {inbox} (chat_id, ref, tenant, agent, tool, input, metadata,"
            " requested_at, requested_by, deciders) SELECT c.chat_id, c.ref, h.tenant, h.agent,"
            " c.name, c.input, %(m)s, %(at)s, c.requested_by, ',role:approver,'"
            " FROM {inbox_calls} c JOIN {inbox_chats} h"
            " ON h.chat_id = c.chat_id WHERE c.chat_id = %(c)s AND c.ref = %(r)s",
            {"c": chat_id, "r": ref, "m": self._json(metadata), "at": self._ts(at)})

    def held(self, chat_id: str, ref: str, state: ApprovalState, at: datetime) -> None:
        """A call held for approval enters the inbox with its terms."""
        self.interrupted(chat_id, ref, {"approval": state.terms.model_dump(mode="json")}, at)
        self.approval_changed(chat_id, ref, state, None)

    def __init__(self, store: ViewStore, read_model: ReadModel) -> None:
        super().__init__(store, read_model)
        # States written in this batch: a read on another connection would not see them yet.
        self._states: dict[tuple[str, str], ApprovalState | None] = {}

    def _begin_batch(self) -> None:
        super()._begin_batch()
        self._states = {}

    def approval_changed(self, chat_id: str, ref: str, state: ApprovalState, input: Any) -> None:
        """Votes, an edit or an escalation: the row shows them and who may decide now."""
        self._states[chat_id, ref] = state
        terms, (roles, groups) = state.current(), state.deciders()
        due = [t for t in (terms.expires_at, None if state.escalated else terms.escalate_at) if t]
        self._run(
            "UPDATE {inbox} SET approval = %(ap)s, expires_at = %(ex)s, due_at = %(due)s,"
            " deciders = %(d)s, voters = %(v)s, input = COALESCE(%(i)s, input)"
            " WHERE chat_id = %(c)s AND ref = %(r)s",
            {"c": chat_id, "r": ref, "ap": self._json(state.model_dump(mode="json")),
             "ex": self._ts(terms.expires_at) if terms.expires_at else None,
             "due": self._ts(min(due)) if due else None,
             "d": _tags(roles, groups), "v": _voters(state, terms.requested_by),
             "i": None if input is None else self._json(input)})

    def approval(self, chat_id: str, ref: str) -> ApprovalState | None:
        """The held call's state: as this batch left it, else as committed."""
        if (chat_id, ref) in self._states:
            return self._states[chat_id, ref]
        rows = self._fetch("SELECT approval FROM {inbox} WHERE chat_id = %(c)s AND ref = %(r)s",
                           {"c": chat_id, "r": ref})
        raw = self._load_json(rows[0]["approval"]) if rows else None
        return None if raw is None else ApprovalState.model_validate(raw)

    def due(self, now: datetime, limit: int, after: Key | None = None) -> list[Key]:
        """Held calls whose expiry or escalation is due at `now`, soonest first (indexed):
        (due_at, chat_id, ref) keys, after the key `after` if given."""
        params: dict[str, Any] = {"now": self._ts(now), "limit": limit}
        beyond = ""
        if after is not None:
            beyond = " AND (due_at, chat_id, ref) > (%(k0)s, %(k1)s, %(k2)s)"
            params.update(k0=self._ts(after[0]), k1=after[1], k2=after[2])
        rows = self._fetch("SELECT due_at, chat_id, ref FROM {inbox} WHERE due_at <= %(now)s"
                           f"{beyond} ORDER BY due_at, chat_id, ref LIMIT %(limit)s", params)
        return [(self._load_ts(r["due_at"]), r["chat_id"], r["ref"]) for r in rows]

    def input_replaced(self, chat_id: str, ref: str, input: Any) -> None:
        self.lookups.flush()
        self._run("UPDATE {inbox_calls} SET input = %(i)s WHERE chat_id = %(c)s AND ref = %(r)s",
                  {"c": chat_id, "r": ref, "i": self._json(input)})

    def gone(self, chat_id: str, ref: str) -> None:
        self.decided(chat_id, ref)

    def decided(self, chat_id: str, ref: str) -> None:
        self._states[chat_id, ref] = None
        self._run("DELETE FROM {inbox} WHERE chat_id = %(c)s AND ref = %(r)s",
                  {"c": chat_id, "r": ref})

    def page(self, f: InboxFilter, limit: int, cursor: str | None) -> Page[InboxRow]:
        """Oldest request first, unless `f.newest_first`."""
        rows = self.query(f, limit + 1, cursors.decode(cursor, str, str))
        return paginate(rows, limit, lambda r: (r.requested_at, r.chat_id, r.ref))

    def query(self, f: InboxFilter, limit: int, after: Key | None) -> list[InboxRow]:
        """Up to `limit` rows after the keyset `after`."""
        conds, params = self._filter(f, after)
        order = ("requested_at DESC, chat_id DESC, ref DESC" if f.newest_first
                 else "requested_at, chat_id, ref")
        rows = self._select(f"SELECT {_COLUMNS} FROM {{inbox}}", conds, order, params, limit)
        return [self._row(r) for r in rows]

    def count(self, f: InboxFilter, cap: int) -> int:
        """How many rows match, counting at most `cap + 1` (so a count never scans the
        inbox): the rows are not read, so a staged call's stage is not worked out."""
        conds, params = self._filter(f, None)
        params["limit"] = cap + 1
        rows = self._fetch(f"SELECT count(*) AS n FROM (SELECT 1 FROM {{inbox}}{where(conds)}"
                           " ORDER BY requested_at, chat_id, ref LIMIT %(limit)s) AS c", params)
        return int(rows[0]["n"])

    def pending_by_tool(self) -> dict[tuple[str, str], int]:
        """How many interrupts wait, by (agent, tool): counted in SQL, no row read."""
        rows = self._fetch("SELECT agent, tool, count(*) AS n FROM {inbox} GROUP BY agent, tool",
                           {})
        return {(r["agent"], r["tool"]): int(r["n"]) for r in rows}

    def _filter(self, f: InboxFilter, after: Key | None) -> tuple[list[str], dict[str, Any]]:
        exact = ("tenant", "chat_id") if f.partial else ("tenant", "agent", "tool", "chat_id")
        conds, params = equal_filters(f.model_dump(), exact)
        for name in ("agent", "tool") if f.partial else ():
            if (value := getattr(f, name)) is not None:
                conds.append(f"lower({name}) LIKE %({name})s ESCAPE '!'")
                params[name] = "%" + _like(value.lower()) + "%"
        if f.older_than is not None:
            conds.append("requested_at < %(older)s")
            params["older"] = self._ts(f.older_than)
        if f.decidable_by is not None:
            _decidable(f.decidable_by, self._ts(datetime.now(UTC)), conds, params)
        if after is not None:
            beyond = "<" if f.newest_first else ">"
            conds.append(f"(requested_at, chat_id, ref) {beyond} (%(k0)s, %(k1)s, %(k2)s)")
            params.update(k0=self._ts(after[0]), k1=after[1], k2=after[2])
        return conds, params

    def ages(self, tenant: str, now: datetime, ages: Sequence[int]) -> dict[int, int]:
        """The tenant's pending calls waiting longer than each of `ages` seconds."""
        sums = ", ".join(f"sum(CASE WHEN requested_at <= %(t{i})s THEN 1 ELSE 0 END) AS a{i}"
                         for i in range(len(ages)))
        params: dict[str, Any] = {f"t{i}": self._ts(now - timedelta(seconds=a))
                                  for i, a in enumerate(ages)}
        row = self._fetch(f"SELECT {sums} FROM {{inbox}} WHERE tenant = %(tenant)s",
                          {**params, "tenant": tenant})[0]
        return {a: int(row[f"a{i}"] or 0) for i, a in enumerate(ages)}

    def _row(self, r: Row) -> InboxRow:
        expires, approval = r["expires_at"], self._load_json(r["approval"])
        return InboxRow(**{**r, "input": self._load_json(r["input"]),
                           "metadata": self._load_json(r["metadata"]),
                           "approval": approval, "stage": _stage(approval),
                           "expires_at": None if expires is None else self._load_ts(expires),
                           "requested_at": self._load_ts(r["requested_at"])})


def _stage(approval: Any) -> CurrentStage | None:
    """A staged call's current stage (only a staged approval's JSON has `stage`)."""
    if not isinstance(approval, dict) or approval.get("stage") is None:
        return None
    return ApprovalState.model_validate(approval).current_stage()


def _token(name: str) -> str:
    """A name as a list item: its commas and percent signs encoded, so items never run on."""
    return name.replace("%", "%25").replace(",", "%2C")


def _listed(names: Iterable[str]) -> str:
    return "," + "".join(f"{_token(n)}," for n in sorted(set(names)))


def _item(name: str) -> str:
    """A LIKE pattern matching the list item `name` exactly (wildcards escaped)."""
    escaped = _token(name).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%,{escaped},%"


def _tags(roles: set[str], groups: set[str]) -> str:
    return _listed([f"role:{r}" for r in roles] + [f"group:{g}" for g in groups])


def _voters(state: ApprovalState, requester: str | None) -> str:
    """Who may not vote now, as the domain rules say (see `barred_voters`)."""
    return _listed(barred_voters(state, requester))


def _decidable(who: Decidable, now: Any, conds: list[str], params: dict[str, Any]) -> None:
    """What `who` may vote on now, by the domain's rules: their role or group is among the
    deciders (any, for an admin), they are not barred (requester, voted on this input),
    and the deadline has not passed (a held call fails closed before the sweeper runs)."""
    if "admin" not in who.roles:
        tags = [f"role:{r}" for r in sorted(who.roles)] + [f"group:{g}" for g in sorted(who.groups)]
        ors = [f"deciders LIKE %(tag{i})s ESCAPE '\\'" for i in range(len(tags))] or ["1 = 0"]
        params.update({f"tag{i}": _item(t) for i, t in enumerate(tags)})
        conds.append("(" + " OR ".join(ors) + ")")
    conds.append("voters NOT LIKE %(me)s ESCAPE '\\'")
    params["me"] = _item(normalise_id(who.id))
    conds.append("(expires_at IS NULL OR expires_at > %(now)s)")
    params["now"] = now


class InboxProjection(Projection[InboxView]):
    """Writes the inbox: an interrupt enters it, a decision removes it."""

    name = "inbox"
    topics = tuple(c.TOPIC for c in (ChatStarted, UserMessageSent, ToolRequested, Interrupted,
                                     Responded, Restarted, ApprovalRequested, ApprovalVoted,
                                     ApprovalEscalated, InterruptExpired, InterruptWithdrawn,
                                     TurnFinished, TurnRetried, ChatForked))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Other events do not change the inbox."""

    @process_event.register
    def _started(self, e: ChatStarted, tracking: Tracking) -> None:
        self.view.chat_started(id_text(e.originator_id), e.tenant, e.agent)

    @process_event.register
    def _message(self, e: UserMessageSent, tracking: Tracking) -> None:
        self.view.message_sent(id_text(e.originator_id), e.actor)

    @process_event.register
    def _finished(self, e: TurnFinished, tracking: Tracking) -> None:
        if e.reason == "failed" and e.error == AWAITS_AGENT:
            self.view.awaits_agent(id_text(e.originator_id), e.timestamp)

    @process_event.register
    def _retried(self, e: TurnRetried, tracking: Tracking) -> None:
        self.view.turn_moved_on(id_text(e.originator_id))

    @process_event.register
    def _forked(self, e: ChatForked, tracking: Tracking) -> None:
        for call in e.asked():  # none once erased before this view read it
            if call.status == "interrupted":
                self.view.call_copied(id_text(e.originator_id), call, e.timestamp)

    @process_event.register
    def _requested(self, e: ToolRequested, tracking: Tracking) -> None:
        self.view.tool_requested(id_text(e.originator_id), e.ref, e.name, e.input)

    @process_event.register
    def _interrupted(self, e: Interrupted, tracking: Tracking) -> None:
        self.view.interrupted(id_text(e.originator_id), e.ref, e.metadata, e.timestamp)

    @process_event.register
    def _responded(self, e: Responded, tracking: Tracking) -> None:
        self.view.decided(id_text(e.originator_id), e.ref)

    @process_event.register
    def _restarted(self, e: Restarted, tracking: Tracking) -> None:
        self.view.decided(id_text(e.originator_id), e.ref)
        if e.replaced_input_sha256 is not None:
            self.view.input_replaced(id_text(e.originator_id), e.ref, e.replace_input)

    @process_event.register
    def _held(self, e: ApprovalRequested, tracking: Tracking) -> None:
        self.view.held(id_text(e.originator_id), e.ref, ApprovalState.opened(e.terms),
                       e.timestamp)

    @process_event.register
    def _voted(self, e: ApprovalVoted, tracking: Tracking) -> None:
        chat_id = id_text(e.originator_id)
        if e.outcome != "pending":
            self.view.decided(chat_id, e.ref)
            return
        state = self.view.approval(chat_id, e.ref)
        if state is None:
            return
        terms = state.terms
        if e.edited_input_sha256 is not None:  # the editor now asks for the new input
            terms = terms.model_copy(update={"requested_by": e.actor})
        state = state.model_copy(update={"votes": list(state.votes), "terms": terms})
        state.record(e.cast(), next_stage=e.next_stage, stages_apply=e.stages_apply)
        self.view.approval_changed(chat_id, e.ref, state, e.edited_input)

    @process_event.register
    def _escalated(self, e: ApprovalEscalated, tracking: Tracking) -> None:
        state = self.view.approval(id_text(e.originator_id), e.ref)
        if state is not None:
            state = state.model_copy(update={"escalated": True})
            self.view.approval_changed(id_text(e.originator_id), e.ref, state, None)

    @process_event.register
    def _expired(self, e: InterruptExpired, tracking: Tracking) -> None:
        self.view.decided(id_text(e.originator_id), e.ref)

    @process_event.register
    def _withdrawn(self, e: InterruptWithdrawn, tracking: Tracking) -> None:
        self.view.decided(id_text(e.originator_id), e.ref)


READ_MODEL = ReadModel(InboxView, InboxProjection)
