"""The decision log: one row per Responded or Restarted event, for compliance."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from pydantic import BaseModel, ConfigDict

from interlock.domain.chat.approval_events import (
    AgentFingerprinted,
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
    UserMessageSent,
)
from interlock.domain.chat.fork_events import ChatForked, asked_in
from interlock.domain.chat.ids import id_text
from interlock.domain.chat.policies import ApprovalTerms
from interlock.domain.chat.rules import SWEEPER
from interlock.projections.engine import cursors
from interlock.projections.engine.fold import JoinedView
from interlock.projections.engine.pages import Page, paginate
from interlock.projections.engine.sql import (
    Key,
    PositionConflictError,
    ReadModel,
    Row,
    equal_filters,
    where,
)
from interlock.projections.views.decision_stats import (
    EXACT_UP_TO,
    STATS_DDL,
    Histogram,
    backfill_sql,
    raw_groups_sql,
    record_sql,
    split,
    summary_groups_sql,
)
from interlock.projections.views.stats import percentile

DecisionKind = Literal["respond", "restart", "approve", "edit", "reject", "expire", "withdraw"]


class DecisionRow(BaseModel):
    """One Responded or Restarted event: the compliance log."""

    model_config = ConfigDict(frozen=True)

    chat_id: str
    tenant: str
    agent: str
    ref: str
    tool: str
    kind: DecisionKind
    original_input: Any = None
    replaced_input: Any = None
    output: Any = None
    resumed_metadata: dict[str, Any] | None = None
    actor: str
    input_sha256: str
    requested_at: datetime
    decided_at: datetime
    version: int
    fingerprint: str | None = None  # the agent definition in force (see GET /v1/agents)
    # A vote on a staged call: the stage it was cast in (its name).
    stage: str | None = None
    # A vote cast by delegation: for whom (`actor` is the delegate) and by which delegation.
    for_actor: str | None = None
    delegation_id: str | None = None
    policy: str | None = None  # the tenant's data policy version it was held under: "id@n"


class DecisionFilter(BaseModel):
    """Which decisions to list, count or export; `until` is exclusive."""

    model_config = ConfigDict(frozen=True)

    tenant: str | None = None
    tool: str | None = None
    actor: str | None = None
    chat_id: str | None = None
    agent: str | None = None
    kind: DecisionKind | None = None
    since: datetime | None = None
    until: datetime | None = None


class DecisionStats(BaseModel):
    """Counts by tool and actor, and time-to-decision percentiles."""

    total: int
    by_tool: dict[str, int]
    by_actor: dict[str, int]
    p50_seconds: float | None
    p95_seconds: float | None


@dataclass(frozen=True)
class Decided:
    """A Responded or Restarted event; the view joins tenant, agent, tool and requested_at.

    `original_input` is None for a respond: the view takes the input it saw requested.
    """

    chat_id: str
    version: int
    ref: str
    kind: DecisionKind
    actor: str
    input_sha256: str
    decided_at: datetime
    original_input: Any = None
    replaced_input: Any = None
    output: Any = None
    resumed_metadata: dict[str, Any] | None = None
    stage: int | None = None  # the index of the stage of a staged call's vote
    for_actor: str | None = None
    delegation_id: str | None = None


_COLUMNS = ("chat_id, tenant, agent, ref, tool, kind, original_input, replaced_input, output,"
            " resumed_metadata, actor, input_sha256, requested_at, decided_at, version,"
            " fingerprint, stage, for_actor, delegation_id, policy")
_JSON = ("original_input", "replaced_input", "output", "resumed_metadata")
# A staged vote's stage name, of the names its call's hold recorded (by the stage's index).
_STAGE = {"postgresql": "c.stages ->> CAST(%(si)s AS integer)",
          "sqlite": "json_extract(c.stages, '$[' || %(si)s || ']')"}
_WAIT = "extract(epoch FROM decided_at - requested_at)::float8"
_UNSUMMARISED = ("SELECT 1 AS x FROM {decisions} WHERE NOT EXISTS (SELECT 1 FROM {decision_stats})"
                 " LIMIT 1")
_PG_PERCENTILES = (f"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY {_WAIT}) AS p50,"
                   f" percentile_cont(0.95) WITHIN GROUP (ORDER BY {_WAIT}) AS p95"
                   " FROM {decisions}")


class DecisionsView(JoinedView):
    """Decisions, plus the chats and calls they are joined from."""

    view_name = "decisions"
    version = 3  # 2: a vote's stage, for_actor and delegation_id; 3: its data policy
    exact_up_to = EXACT_UP_TO  # more matching decisions than this: percentiles estimated
    tables = ("decisions", "decision_chats", "decision_calls", "decisions_time_idx",
              "decisions_tenant_idx", "decisions_tool_idx", "decisions_actor_idx",
              "decisions_chat_idx", "decisions_tenant_actor_idx", "decisions_tenant_tool_idx",
              "decisions_tenant_kind_idx", "decision_stats")
    ddl = (
        "CREATE TABLE IF NOT EXISTS {decision_chats} (chat_id text PRIMARY KEY,"
        " tenant text NOT NULL, agent text NOT NULL, fingerprint text)",
        "CREATE TABLE IF NOT EXISTS {decision_calls} (chat_id text NOT NULL, ref text NOT NULL,"
        " name text NOT NULL, input {json}, interrupted_at {ts}, stages {json}, policy text,"
        " PRIMARY KEY (chat_id, ref))",
        "CREATE TABLE IF NOT EXISTS {decisions} (chat_id text NOT NULL, version bigint NOT NULL,"
        " ref text NOT NULL, tenant text NOT NULL, agent text NOT NULL, tool text NOT NULL,"
        " kind text NOT NULL, original_input {json}, replaced_input {json}, output {json},"
        " resumed_metadata {json}, actor text NOT NULL, input_sha256 text NOT NULL,"
        " requested_at {ts} NOT NULL, decided_at {ts} NOT NULL, fingerprint text,"
        " stage text, for_actor text, delegation_id text, policy text,"
        " PRIMARY KEY (chat_id, version))",
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
        # The console always filters by tenant: each filter it offers has its own index.
        "CREATE INDEX IF NOT EXISTS {decisions_tenant_actor_idx} ON {decisions}"
        " (tenant, actor, decided_at, chat_id, version)",
        "CREATE INDEX IF NOT EXISTS {decisions_tenant_tool_idx} ON {decisions}"
        " (tenant, tool, decided_at, chat_id, version)",
        "CREATE INDEX IF NOT EXISTS {decisions_tenant_kind_idx} ON {decisions}"
        " (tenant, kind, decided_at, chat_id, version)",
        *STATS_DDL,
    )
    dump_sql = f"SELECT {_COLUMNS} FROM {{decisions}} ORDER BY chat_id, version"
    # Chats and calls started in this batch are held until a statement reads them (a
    # decision) or the batch ends: their fingerprint and interruption fold in.
    lookup_inserts = ("INSERT INTO {decision_chats} VALUES (%(c)s, %(t)s, %(a)s, %(f)s)",
                      "INSERT INTO {decision_calls} VALUES (%(c)s, %(r)s, %(n)s, %(i)s, %(at)s,"
                      " %(s)s, %(p)s)")

    def chat_started(self, chat_id: str, tenant: str, agent: str) -> None:
        self.lookups.chat_started(chat_id, {"c": chat_id, "t": tenant, "a": agent, "f": None})

    def tool_requested(self, chat_id: str, ref: str, name: str, input: Any) -> None:
        self.lookups.tool_requested(
            chat_id, ref, {"c": chat_id, "r": ref, "n": name, "i": self._json(input), "at": None,
                           "s": None, "p": None})

    def interrupted(self, chat_id: str, ref: str, at: datetime) -> None:
        if self.lookups.fold_call(chat_id, ref, at=self._ts(at)):
            return
        self._run("UPDATE {decision_calls} SET interrupted_at = %(at)s"
                  " WHERE chat_id = %(c)s AND ref = %(r)s",
                  {"c": chat_id, "r": ref, "at": self._ts(at)})

    def held(self, chat_id: str, ref: str, at: datetime, stages: list[str] | None,
             policy: str | None) -> None:
        """A call held for approval at `at`; a staged one's stage names, in order; the data
        policy version `policy` ("id@n") it was held under."""
        if stages is None and policy is None:
            self.interrupted(chat_id, ref, at)
            return
        names = None if stages is None else self._json(stages)
        if self.lookups.fold_call(chat_id, ref, at=self._ts(at), s=names, p=policy):
            return
        self._run("UPDATE {decision_calls} SET interrupted_at = %(at)s, stages = %(s)s,"
                  " policy = %(p)s WHERE chat_id = %(c)s AND ref = %(r)s",
                  {"c": chat_id, "r": ref, "at": self._ts(at), "s": names, "p": policy})

    def input_replaced(self, chat_id: str, ref: str, input: Any) -> None:
        if self.lookups.fold_call(chat_id, ref, i=self._json(input)):
            return
        self._run("UPDATE {decision_calls} SET input = %(i)s WHERE chat_id = %(c)s"
                  " AND ref = %(r)s", {"c": chat_id, "r": ref, "i": self._json(input)})

    def fingerprinted(self, chat_id: str, fingerprint: str) -> None:
        if self.lookups.fold_chat(chat_id, f=fingerprint):
            return
        self._run("UPDATE {decision_chats} SET fingerprint = %(f)s WHERE chat_id = %(c)s",
                  {"c": chat_id, "f": fingerprint})

    def decided(self, d: Decided) -> None:
        self.lookups.flush()  # the decision is joined from its call and chat
        original = "%(oi)s" if d.kind == "restart" else "c.input"
        stage = "NULL" if d.stage is None else _STAGE[self.dialect]
        self._run(
            "INSERT INTO {decisions} SELECT c.chat_id, %(v)s, c.ref, h.tenant, h.agent, c.name,"
            f" %(k)s, {original}, %(ri)s, %(o)s, %(rm)s, %(a)s, %(sha)s, c.interrupted_at, %(at)s,"
            f" h.fingerprint, {stage}, %(fa)s, %(di)s, c.policy"
            " FROM {decision_calls} c JOIN {decision_chats} h ON h.chat_id = c.chat_id"
            " WHERE c.chat_id = %(c)s AND c.ref = %(r)s",
            {"c": d.chat_id, "r": d.ref, "v": d.version, "k": d.kind,
             "oi": self._json(d.original_input), "ri": self._json(d.replaced_input),
             "o": self._json(d.output), "rm": self._json(d.resumed_metadata), "a": d.actor,
             "sha": d.input_sha256, "at": self._ts(d.decided_at), "fa": d.for_actor,
             "di": d.delegation_id, **({} if d.stage is None else {"si": d.stage})})
        self._run(record_sql(self.dialect), {"c": d.chat_id, "v": d.version})

    def setup(self) -> None:
        """Create the tables if missing; summarise decisions an older version recorded."""
        super().setup()
        if not self._fetch(_UNSUMMARISED, {}):
            return
        for _ in range(5):  # a runner moving the position meanwhile: try again
            position = self.position()
            try:
                with self.batch(position, position):
                    self._run(backfill_sql(self.dialect), {})
                return
            except PositionConflictError:
                continue

    def page(self, f: DecisionFilter, limit: int, cursor: str | None) -> Page[DecisionRow]:
        """Newest decision first."""
        rows = self.query(f, limit + 1, cursors.decode(cursor, str, int))
        return paginate(rows, limit, lambda r: (r.decided_at, r.chat_id, r.version))

    def query(self, f: DecisionFilter, limit: int, after: Key | None) -> list[DecisionRow]:
        """Up to `limit` rows after the keyset `after`."""
        conds, params = self._where(f)
        if after is not None:
            conds.append("(decided_at, chat_id, version) < (%(k0)s, %(k1)s, %(k2)s)")
            params.update(k0=self._ts(after[0]), k1=after[1], k2=after[2])
        rows = self._select(f"SELECT {_COLUMNS} FROM {{decisions}}", conds,
                            "decided_at DESC, chat_id DESC, version DESC", params, limit)
        return [self._row(r) for r in rows]

    def _where(self, f: DecisionFilter) -> tuple[list[str], dict[str, Any]]:
        conds, params = equal_filters(f.model_dump(),
                                      ("tenant", "tool", "actor", "chat_id", "agent", "kind"))
        if f.since is not None:
            conds.append("decided_at >= %(since)s")
            params["since"] = self._ts(f.since)
        if f.until is not None:
            conds.append("decided_at < %(until)s")
            params["until"] = self._ts(f.until)
        return conds, params

    def _row(self, r: Row) -> DecisionRow:
        loaded = {k: self._load_json(r[k]) for k in _JSON}
        return DecisionRow(**{**r, **loaded, "requested_at": self._load_ts(r["requested_at"]),
                              "decided_at": self._load_ts(r["decided_at"])})

    def stats(self, f: DecisionFilter, groups: list[Row] | None = None) -> DecisionStats:
        """Counts and time-to-decision percentiles of the decisions `f` selects (from its
        `groups`, when the caller read them already).

        Whole days come from the summary the projection keeps (see `decision_stats`), so a
        request reads at most its two partial edge days of rows, never the whole log.
        """
        h = Histogram.of(self._groups(f) if groups is None else groups)
        if h.total <= self.exact_up_to:
            conds, params = self._where(f)
            p50, p95 = self._percentiles(where(conds), params)
        else:
            p50, p95 = h.percentile(0.5), h.percentile(0.95)
        return DecisionStats(total=h.total, by_tool=dict(sorted(h.by_tool.items())),
                             by_actor=dict(sorted(h.by_actor.items())),
                             p50_seconds=p50, p95_seconds=p95)

    def groups(self, f: DecisionFilter) -> list[Row]:
        """Counts by tool, actor, kind and wait bucket (decision_stats.bucket) of the
        decisions `f` selects: whole days from the summary, edge days from the rows."""
        return self._groups(f)

    def _groups(self, f: DecisionFilter) -> list[Row]:
        if f.chat_id is not None:  # one chat: its rows are few and indexed
            return self._raw_groups(f)
        part = split(f.since, f.until)
        groups = [g for since, until in part.edges
                  for g in self._raw_groups(f.model_copy(update={"since": since, "until": until}))]
        if part.days is not None:
            groups += self._summary_groups(f, *part.days)
        return groups

    def _raw_groups(self, f: DecisionFilter) -> list[Row]:
        conds, params = self._where(f)
        return self._fetch(raw_groups_sql(self.dialect, where(conds)), params)

    def _summary_groups(self, f: DecisionFilter, first: str | None, last: str | None) -> list[Row]:
        conds, params = equal_filters(f.model_dump(), ("tenant", "tool", "actor", "agent", "kind"))
        if first is not None:
            conds.append("day >= %(first)s")
            params["first"] = first
        if last is not None:
            conds.append("day < %(last)s")
            params["last"] = last
        return self._fetch(summary_groups_sql(where(conds)), params)

    def _percentiles(self, where: str, params: dict[str, Any]) -> tuple[float | None, float | None]:
        if self.dialect == "postgresql":  # computed by the server
            row = self._fetch(_PG_PERCENTILES + where, params)[0]
            return row["p50"], row["p95"]
        rows = self._fetch(f"SELECT requested_at, decided_at FROM {{decisions}}{where}", params)
        waits = sorted((self._load_ts(r["decided_at"]) - self._load_ts(r["requested_at"]))
                       .total_seconds() for r in rows)
        return percentile(waits, 0.5), percentile(waits, 0.95)


class DecisionsProjection(Projection[DecisionsView]):
    """Writes the decision log: one row per Responded or Restarted event."""

    name = "decisions"
    topics = tuple(c.TOPIC for c in (ChatStarted, ToolRequested, Interrupted, Responded,
                                     Restarted, ApprovalRequested, ApprovalVoted,
                                     InterruptExpired, InterruptWithdrawn, AgentFingerprinted,
                                     UserMessageSent, ChatForked))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Other events do not change the decision log."""

    @process_event.register
    def _started(self, e: ChatStarted, tracking: Tracking) -> None:
        self.view.chat_started(id_text(e.originator_id), e.tenant, e.agent)

    @process_event.register
    def _requested(self, e: ToolRequested, tracking: Tracking) -> None:
        self.view.tool_requested(id_text(e.originator_id), e.ref, e.name, e.input)

    @process_event.register
    def _forked(self, e: ChatForked, tracking: Tracking) -> None:
        """A fork's calls asked afresh are decided in the fork: its log joins them as a
        reply's calls (none once erased before this view read it)."""
        chat_id, begun = id_text(e.originator_id), e.begun()
        if begun is not None and begun.fingerprint is not None:
            self.view.fingerprinted(chat_id, begun.fingerprint)
        for call in asked_in(begun):
            self.view.tool_requested(chat_id, call.ref, call.name, call.input)
            if call.status == "interrupted" and call.interrupted_at is not None:
                terms = call.approval.terms if call.approval is not None else None
                self.view.held(chat_id, call.ref, call.interrupted_at, _stage_names(terms),
                               _policy_ref(terms))

    @process_event.register
    def _interrupted(self, e: Interrupted, tracking: Tracking) -> None:
        self.view.interrupted(id_text(e.originator_id), e.ref, e.timestamp)

    @process_event.register
    def _responded(self, e: Responded, tracking: Tracking) -> None:
        self.view.decided(Decided(
            chat_id=id_text(e.originator_id), version=e.originator_version, ref=e.ref,
            kind="respond", actor=e.actor, input_sha256=e.input_sha256, decided_at=e.timestamp,
            output=e.output, resumed_metadata=e.metadata,
        ))

    @process_event.register
    def _restarted(self, e: Restarted, tracking: Tracking) -> None:
        replaced = e.replaced_input_sha256 is not None
        self.view.decided(Decided(
            chat_id=id_text(e.originator_id), version=e.originator_version, ref=e.ref,
            kind="restart", actor=e.actor, input_sha256=e.input_sha256, decided_at=e.timestamp,
            original_input=e.original_input, replaced_input=e.replace_input if replaced else None,
            resumed_metadata=e.resumed_metadata,
        ))
        if replaced:
            self.view.input_replaced(id_text(e.originator_id), e.ref, e.replace_input)

    @process_event.register
    def _held(self, e: ApprovalRequested, tracking: Tracking) -> None:
        self.view.held(id_text(e.originator_id), e.ref, e.timestamp, _stage_names(e.terms),
                       _policy_ref(e.terms))

    @process_event.register
    def _voted(self, e: ApprovalVoted, tracking: Tracking) -> None:
        edited = e.edited_input_sha256 is not None
        output = {"rejected": True, "by": e.actor, "reason": e.reason} if e.vote == "reject" \
            else {"outcome": e.outcome}
        self.view.decided(Decided(
            chat_id=id_text(e.originator_id), version=e.originator_version, ref=e.ref, kind=e.vote,
            actor=e.actor, input_sha256=e.input_sha256, decided_at=e.timestamp,
            replaced_input=e.edited_input if edited else None, output=output,
            resumed_metadata=e.resume_metadata, stage=e.stage, for_actor=e.for_actor,
            delegation_id=e.delegation_id))
        if edited:
            self.view.input_replaced(id_text(e.originator_id), e.ref, e.edited_input)

    @process_event.register
    def _expired(self, e: InterruptExpired, tracking: Tracking) -> None:
        self.view.decided(Decided(
            chat_id=id_text(e.originator_id), version=e.originator_version, ref=e.ref,
            kind="expire", actor=SWEEPER, input_sha256=e.input_sha256, decided_at=e.timestamp,
            output={"expired": True, "at": e.expires_at.isoformat()}))

    @process_event.register
    def _withdrawn(self, e: InterruptWithdrawn, tracking: Tracking) -> None:
        self.view.decided(Decided(
            chat_id=id_text(e.originator_id), version=e.originator_version, ref=e.ref,
            kind="withdraw", actor=e.actor, input_sha256=e.input_sha256, decided_at=e.timestamp,
            output={"withdrawn": True, "by": e.actor, "reason": e.reason}))

    @process_event.register
    def _fingerprinted(self, e: AgentFingerprinted, tracking: Tracking) -> None:
        self.view.fingerprinted(id_text(e.originator_id), e.fingerprint)

    @process_event.register
    def _sent(self, e: UserMessageSent, tracking: Tracking) -> None:
        if e.fingerprint is not None:  # the turn's agent, as an AgentFingerprinted records it
            self.view.fingerprinted(id_text(e.originator_id), e.fingerprint)


def _policy_ref(terms: ApprovalTerms | None) -> str | None:
    """The data policy version a call was held under, "id@n" (None: the code's policy)."""
    policy = terms.policy if terms is not None else None
    return None if policy is None else policy.label


def _stage_names(terms: ApprovalTerms | None) -> list[str] | None:
    """A staged policy's stage names, in order (None: one stage, or not an approval)."""
    if terms is None or terms.stages is None:
        return None
    return [s.name for s in terms.stages]


READ_MODEL = ReadModel(DecisionsView, DecisionsProjection)
