"""The review read model: one fact row per decision with what review queries ask of it
(who requested and edited the call, how long it waited, whether the same tool expired
before in the chat, whether the agent's fingerprint changed, whether its actor had opened
the call's page on that input), and the reviews' progress."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import ProgrammingError, Tracking
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
from interlock.domain.chat.policies import ApprovalTerms, normalise_id
from interlock.domain.chat.rules import SWEEPER
from interlock.domain.delegations import DelegationGranted, DelegationRevoked
from interlock.domain.receipts import CallViewed
from interlock.domain.review.events import (
    ItemAssessed,
    ReviewClosed,
    ReviewOpened,
    ReviewSignedOff,
)
from interlock.domain.review.filters import Node
from interlock.domain.review.sampling import (
    METHOD,
    Candidate,
    Method,
    allot,
    key_word,
    mix64,
    rank,
    ranking,
    seed_word,
)
from interlock.projections.engine import cursors
from interlock.projections.engine.fold import JoinedView
from interlock.projections.engine.pages import Page, paginate
from interlock.projections.engine.sql import ReadModel, Row
from interlock.projections.views.review_sql import compile_filter
from interlock.projections.views.review_tables import (
    AGES,
    DDL,
    FACT_COLUMNS,
    OVERSIGHT,
    RANK,
    RECEIPT,
    TABLES,
    TIES,
    fact_sql,
)


class ReviewFact(BaseModel):
    """One decision as review queries see it."""

    model_config = ConfigDict(frozen=True)

    chat_id: str
    version: int
    ref: str
    tenant: str
    agent: str
    tool: str
    kind: str
    actor: str
    requested_by: str | None = None
    edited_by: str | None = None
    asked_at: datetime | None = None
    decided_at: datetime
    wait_seconds: float | None = None
    input: Any = None
    fingerprint: str | None = None
    fingerprint_changes: int = 0
    prior_expiries: int = 0
    requester_approved: bool = False
    edited: bool = False
    reasked: bool = False
    fingerprint_changed: bool = False
    viewed: bool = False
    viewed_at: datetime | None = None
    stage: str | None = None  # a staged call's vote: the stage it was cast in
    for_actor: str | None = None  # a vote by delegation: its delegator (`actor`: the delegate)
    delegation_id: str | None = None
    delegated: bool = False
    delegation_active: bool = False  # in force when the vote was cast, as the log had it
    stage_skipped: bool = False  # approved with a stage of its policy never approved
    stage_unapproved: bool = False  # ... and that stage applied to the input (an alarm)
    policy: str | None = None  # the data policy version the call was held under ("id@n")


@dataclass(frozen=True)
class Cast:
    """What a vote adds to its decision's fact: its stage (index), by delegation for whom
    and by which, and whether it approved the call (its outcome)."""

    stage: int | None = None
    for_actor: str | None = None
    delegation_id: str | None = None
    approved: bool = False


class ReviewSummary(BaseModel):
    """One review's progress."""

    review_id: str
    tenant: str
    status: str
    opened_by: str
    opened_at: datetime
    query_name: str
    query_version: int
    items: int
    assessed: int
    findings: int
    signed_off_by: str | None = None


_STRATA = {"agent": "agent", "tool": "tool", "actor": "actor_norm", "kind": "kind"}
_ACTORS = (
    "WITH RECURSIVE a(v) AS (SELECT min(actor_norm) FROM {review_facts} WHERE tenant = %(t)s"
    " UNION ALL SELECT (SELECT min(actor_norm) FROM {review_facts} WHERE tenant = %(t)s"
    " AND actor_norm > a.v) FROM a WHERE a.v IS NOT NULL) SELECT v FROM a WHERE v IS NOT NULL")


class ReviewsView(JoinedView):
    """Review facts per decision, the calls and chats they are joined from, and reviews."""

    view_name = "reviews"
    version = 3  # 2: a fact's stage and delegation, stage_skipped and stage_unapproved;
    # 3: the data policy version a call was held under
    tables = TABLES
    ddl = DDL
    dump_sql = f"SELECT {FACT_COLUMNS} FROM {{review_facts}} ORDER BY chat_id, version"

    def setup(self) -> None:
        if self._predates_receipts():  # its new columns and index: the view is rebuilt
            self.store.reset()
        super().setup()
        db = getattr(self.store, "db", None)
        if self.dialect == "sqlite" and db is not None:  # what PostgreSQL does natively
            db.conn.create_function("review_isodow", 2, _isodow, deterministic=True)
            db.conn.create_function("review_clock", 2, _clock, deterministic=True)
            db.conn.create_function("review_rank", 3, _rank, deterministic=True)
            db.conn.create_function("review_mix64", 2, mix64, deterministic=True)

    def _predates_receipts(self) -> bool:
        """Whether the view's facts were made before view receipts or the sampling key (no
        `viewed` or `key_word` column): their CREATE TABLE IF NOT EXISTS would keep the old
        shape, and the new index fail."""
        try:
            self._fetch("SELECT viewed, key_word, policy FROM {review_facts} WHERE 1 = 0", {})
            self._fetch("SELECT policy FROM {review_calls} WHERE 1 = 0", {})
        except ProgrammingError as exc:  # eventsourcing's, around psycopg's
            return isinstance(exc.__cause__, psycopg.errors.UndefinedColumn)
        except sqlite3.OperationalError as exc:
            return "no such column" in str(exc)
        return False

    # -- writes ------------------------------------------------------------------------------

    # Chats and calls started in this batch are held until a statement reads or changes
    # them in SQL or the batch ends: a chat's turn and fingerprint, a call's ask fold in.
    # A held call's requester and prior expiries are read when it is written: every
    # change to what they read (a turn, a settled call) flushes it first.
    lookup_inserts = (
        "INSERT INTO {review_chats} VALUES (%(c)s, %(t)s, %(a)s, %(u)s, %(un)s, %(f)s, %(n)s)",
        "INSERT INTO {review_calls} SELECT %(c)s, %(r)s, %(n)s, %(i)s, h.turn_by,"
        " h.turn_norm, NULL, NULL, %(at)s, (SELECT count(*) FROM {review_calls} e"
        " WHERE e.chat_id = %(c)s AND e.tool = %(n)s AND e.expired), false, %(w)s, %(p)s"
        " FROM {review_chats} h WHERE h.chat_id = %(c)s")

    def chat_started(self, chat_id: str, tenant: str, agent: str, actor: str) -> None:
        self.lookups.chat_started(chat_id, {
            "c": chat_id, "t": tenant, "a": agent, "u": actor, "un": normalise_id(actor),
            "f": None, "n": 0})

    def turn_sent(self, chat_id: str, actor: str) -> None:
        if self.lookups.calls.holds_chat(chat_id):  # its held calls read the turn they
            self.lookups.flush()  # were asked in (other chats' calls read theirs)
        if self.lookups.fold_chat(chat_id, u=actor, un=normalise_id(actor)):
            return
        self._run("UPDATE {review_chats} SET turn_by = %(u)s, turn_norm = %(un)s"
                  " WHERE chat_id = %(c)s", {"c": chat_id, "u": actor, "un": normalise_id(actor)})

    def fingerprinted(self, chat_id: str, fingerprint: str) -> None:
        held = self.lookups.chats.rows.get((chat_id,))
        if held is not None:
            held["f"], held["n"] = fingerprint, held["n"] + 1
            return
        self._run("UPDATE {review_chats} SET fingerprint = %(f)s, fingerprints = fingerprints + 1"
                  " WHERE chat_id = %(c)s", {"c": chat_id, "f": fingerprint})

    def tool_requested(self, chat_id: str, ref: str, tool: str, input: Any) -> None:
        self.lookups.tool_requested(chat_id, ref, {
            "c": chat_id, "r": ref, "n": tool, "i": self._json(input), "at": None, "w": False,
            "p": None})

    def asked(self, chat_id: str, ref: str, at: datetime, policy: str | None = None) -> None:
        """Held or interrupted at `at`; held under the data policy version `policy` ("id@n")."""
        if self.lookups.fold_call(chat_id, ref, at=self._ts(at), w=True, p=policy):
            return
        self._run("UPDATE {review_calls} SET asked_at = %(at)s, waiting = true, policy = %(p)s"
                  " WHERE chat_id = %(c)s AND ref = %(r)s",
                  {"c": chat_id, "r": ref, "at": self._ts(at), "p": policy})

    def decided(self, chat_id: str, version: int, ref: str, kind: str, actor: str,
                at: datetime, input_sha256: str, settles: bool = True,
                cast: Cast | None = None) -> None:
        """A decision's fact and running totals; one that `settles` ends the wait.
        `input_sha256`: the input decided on (its actor's receipt of it makes it viewed);
        `cast`: a vote's stage and delegation."""
        self.lookups.flush()  # the fact is joined from its call and chat
        cast = cast or Cast()
        if kind == "approve" and cast.stage is not None:  # before its fact reads the stages
            self._run("UPDATE {review_stages} SET approved = true WHERE chat_id = %(c)s"
                      " AND ref = %(r)s AND idx = %(i)s", {"c": chat_id, "r": ref,
                                                          "i": cast.stage})
        self._run(fact_sql(self.dialect), {
            "c": chat_id, "r": ref, "v": version, "k": kind, "a": actor,
            "an": normalise_id(actor), "at": self._ts(at), "h": input_sha256,
            "kw": key_word(f"{chat_id}#{version}"), "si": cast.stage, "fa": cast.for_actor,
            "fan": normalise_id(cast.for_actor) if cast.for_actor else None,
            "di": cast.delegation_id, "dg": cast.delegation_id is not None,
            "fin": cast.approved})
        self._run(OVERSIGHT, {"c": chat_id, "v": version})
        if settles:
            self._run("UPDATE {review_calls} SET waiting = false, expired = %(x)s"
                      " WHERE chat_id = %(c)s AND ref = %(r)s",
                      {"c": chat_id, "r": ref, "x": kind == "expire"})

    def staged(self, chat_id: str, ref: str, names: list[str], applying: list[bool]) -> None:
        """A staged call held (or asked afresh by a fork): its stages, none approved."""
        self._run_many("INSERT INTO {review_stages} VALUES (%(c)s, %(r)s, %(i)s, %(n)s, %(ap)s,"
                       " false)", [{"c": chat_id, "r": ref, "i": i, "n": n, "ap": a}
                                   for i, (n, a) in enumerate(zip(names, applying, strict=True))])

    def restaged(self, chat_id: str, ref: str, applying: list[bool]) -> None:
        """An edit of a staged call: the stages its new input goes through, none approved."""
        self._run_many("UPDATE {review_stages} SET applies = %(ap)s, approved = false"
                       " WHERE chat_id = %(c)s AND ref = %(r)s AND idx = %(i)s",
                       [{"c": chat_id, "r": ref, "i": i, "ap": a}
                        for i, a in enumerate(applying)])

    def delegation_granted(self, e: DelegationGranted) -> None:
        self._run("INSERT INTO {review_delegations} VALUES (%(d)s, %(t)s, %(g)s, %(e)s,"
                  " %(s)s, %(u)s, NULL)",
                  {"d": str(e.delegation_id), "t": e.tenant, "g": e.delegator,
                   "e": e.delegate, "s": self._ts(e.starts_at), "u": self._ts(e.ends_at)})

    def delegation_revoked(self, e: DelegationRevoked) -> None:
        self._run("UPDATE {review_delegations} SET revoked_at = %(at)s"
                  " WHERE delegation_id = %(d)s AND revoked_at IS NULL",
                  {"d": str(e.delegation_id), "at": self._ts(e.timestamp)})

    def viewed(self, e: CallViewed) -> None:
        """A view receipt: its principal's first showing of that input of the call."""
        self._run(RECEIPT, {"c": str(e.chat_id), "r": e.ref, "vn": normalise_id(e.principal),
                            "h": e.input_sha256, "at": self._ts(e.timestamp)})

    def edited(self, chat_id: str, ref: str, actor: str, input: Any) -> None:
        self.lookups.flush()
        self._run("UPDATE {review_calls} SET input = %(i)s, edited_by = %(a)s, edited_norm ="
                  " %(an)s WHERE chat_id = %(c)s AND ref = %(r)s",
                  {"c": chat_id, "r": ref, "i": self._json(input), "a": actor,
                   "an": normalise_id(actor)})

    def review_opened(self, e: ReviewOpened) -> None:
        self._run("INSERT INTO {reviews} VALUES (%(id)s, %(t)s, 'open', %(a)s, %(at)s, %(q)s,"
                  " %(qv)s, %(n)s, 0, 0, NULL)",
                  {"id": id_text(e.originator_id), "t": e.tenant, "a": e.actor,
                   "at": self._ts(e.timestamp), "q": e.query.name, "qv": e.query.version,
                   "n": len(e.items)})
        self._run_many("INSERT INTO {review_items} VALUES (%(id)s, %(n)s, %(c)s, %(v)s, %(r)s,"
                       " NULL, NULL, NULL, NULL, NULL)",
                       [{"id": id_text(e.originator_id), "n": i.n, "c": i.chat_id, "v": i.version,
                         "r": i.ref} for i in e.items])

    def item_assessed(self, e: ItemAssessed) -> None:
        params = {"id": id_text(e.originator_id), "n": e.item, "vd": e.verdict, "s": e.severity,
                  "nt": e.note, "a": e.actor, "at": self._ts(e.timestamp),
                  "f": int(e.verdict == "finding")}
        self._run("UPDATE {review_items} SET verdict = %(vd)s, severity = %(s)s, note = %(nt)s,"
                  " assessed_by = %(a)s, assessed_at = %(at)s WHERE review_id = %(id)s"
                  " AND n = %(n)s", params)
        self._run("UPDATE {reviews} SET assessed = assessed + 1, findings = findings + %(f)s"
                  " WHERE review_id = %(id)s", params)

    def review_status(self, review_id: str, status: str, actor: str) -> None:
        self._run("UPDATE {reviews} SET status = %(s)s, signed_off_by = CASE WHEN %(s)s ="
                  " 'signed_off' THEN %(a)s ELSE signed_off_by END WHERE review_id = %(id)s",
                  {"id": review_id, "s": status, "a": actor})

    # -- queries -----------------------------------------------------------------------------

    def facts(self, tenant: str, node: Node, limit: int,
              cursor: str | None = None) -> Page[ReviewFact]:
        """The decisions of `tenant` the bound filter selects, newest first."""
        cond, params = compile_filter(node, self.dialect, self._ts)
        conds = ["tenant = %(tenant)s", cond]
        params["tenant"] = tenant
        after = cursors.decode(cursor, str, int)
        if after is not None:
            conds.append("(decided_at, chat_id, version) < (%(k0)s, %(k1)s, %(k2)s)")
            params.update(k0=self._ts(after[0]), k1=after[1], k2=after[2])
        rows = self._select(f"SELECT {FACT_COLUMNS} FROM {{review_facts}}", conds,
                            "decided_at DESC, chat_id DESC, version DESC", params, limit + 1)
        return paginate([self._fact(r) for r in rows], limit,
                        lambda f: (f.decided_at, f.chat_id, f.version))

    def population(self, tenant: str, node: Node, strata: tuple[str, ...]) -> list[Candidate]:
        """Every decision the filter selects, as sampling candidates (tests, small answers)."""
        cond, params = compile_filter(node, self.dialect, self._ts)
        params["tenant"] = tenant
        return self._candidates(f"tenant = %(tenant)s AND {cond}", params, strata)

    def sample(self, tenant: str, node: Node, strata: tuple[str, ...], size: int, seed: str,
               method: Method = METHOD) -> tuple[list[Candidate], dict[tuple[str, ...], int]]:
        """sampling.draw over the filter's answer, ranked by the store; and each stratum's
        size. Only the drawn rows leave the database."""
        cond, params = compile_filter(node, self.dialect, self._ts)
        params["tenant"] = tenant
        cond = f"tenant = %(tenant)s AND {cond}"
        columns = [_STRATA[s] for s in strata]
        grouped = ", ".join(columns)
        rows = self._fetch(
            f"SELECT {grouped + ', ' if grouped else ''}count(*) AS n FROM {{review_facts}}"
            f" WHERE {cond}{' GROUP BY ' + grouped if grouped else ''}", params)
        sizes = {tuple(str(r[c]) for c in columns): int(r["n"]) for r in rows if r["n"]}
        seats = allot(sizes, min(size, sum(sizes.values())))
        if max(seats.values(), default=0) == 0:
            return [], sizes
        params.update(seed=seed, word=seed_word(seed))
        found = self._lowest(cond, params, strata, seats, sizes, method)
        groups: dict[tuple[str, ...], list[Candidate]] = {}
        for c in sorted(found, key=ranking(seed, method)):
            groups.setdefault(c.strata, []).append(c)
        return [c for k in sorted(groups) for c in groups[k][:seats[k]]], sizes

    def _lowest(self, cond: str, params: dict[str, Any], strata: tuple[str, ...],
                seats: dict[tuple[str, ...], int], sizes: dict[tuple[str, ...], int],
                method: Method) -> list[Candidate]:
        """At least each stratum's seats of its lowest ranks (all there are if fewer)."""
        rank = RANK[method, self.dialect]
        order, most = f"{rank}, {TIES[self.dialect]}", max(seats.values())
        if method == "sha256-v1":
            if not strata:
                return self._candidates(f"{cond} ORDER BY {order} LIMIT %(most)s",
                                        {**params, "most": most}, ())
            return self._ranked(cond, params, strata, None, order, most)
        # Ranks are uniform over 64 bits: the rows of a stratum ranked below its threshold
        # (twice its seats expected, and 16 more) hold its lowest ranks when there are seats
        # of them. A stratum short of them (rarely) is ranked again whole: exact either way.
        if not strata:
            return self._lowest_of_all(cond, params, order, rank, most, sum(sizes.values()))
        limits = {k: _threshold(2 * seats[k] + 16, sizes[k]) for k in seats if seats[k]}
        if len(limits) > _MAX_LIMITS:  # each a row of bound values: rank every row instead
            return self._ranked(cond, params, strata, None, order, most)
        below = f" AND {rank} <= th.t"
        found = self._ranked(cond + below, params, strata, limits, order, most)
        got = Counter(c.strata for c in found)
        short = {k: _ALL for k in limits if got[k] < seats[k]}
        if not short:
            return found
        return [c for c in found if c.strata not in short] + self._ranked(
            cond, params, strata, short, order, most)

    def _lowest_of_all(self, cond: str, params: dict[str, Any], order: str, rank: str,
                       most: int, size: int) -> list[Candidate]:
        """The `most` lowest ranks of an unstratified answer of `size` rows (mix64-v2)."""
        limit = f"ORDER BY {order} LIMIT %(most)s"
        bound = {**params, "most": most, "t": _threshold(2 * most + 16, size)}
        found = self._candidates(f"{cond} AND {rank} <= %(t)s {limit}", bound, ())
        if len(found) < most:
            found = self._candidates(f"{cond} {limit}", bound, ())
        return found

    def _ranked(self, cond: str, params: dict[str, Any], strata: tuple[str, ...],
                limits: dict[tuple[str, ...], int] | None, order: str,
                most: int) -> list[Candidate]:
        """The `most` lowest ranks of each stratum in `limits` (`th.t`: its limit), or of
        every stratum when there are no limits."""
        columns = [_STRATA[s] for s in strata]
        names = [f"th.c{j}" for j in range(len(strata))] if limits is not None else columns
        extra = "".join(f", {_STRATA[s]} AS s_{s}" for s in strata)
        with_, join, bound = "", "", dict(params, most=most)
        if limits is not None:
            with_, join = self._limits(limits, bound), " JOIN th ON " + " AND ".join(
                f"{c} = {n}" for c, n in zip(columns, names, strict=True))
        rows = self._fetch(
            f"{with_}SELECT * FROM (SELECT chat_id, version, ref, kind, actor{extra},"
            f" row_number() OVER (PARTITION BY {', '.join(names)} ORDER BY {order}) AS pick"
            f" FROM {{review_facts}}{join} WHERE {cond}) AS ranked WHERE pick <= %(most)s",
            bound)
        return [_candidate(r, strata) for r in rows]

    @staticmethod
    def _limits(limits: dict[tuple[str, ...], int], bound: dict[str, Any]) -> str:
        """`WITH th(c0, ..., t) AS (VALUES ...)`: each stratum and its limit, bound."""
        rows = []
        for i, (key, limit) in enumerate(sorted(limits.items())):
            bound.update({f"s{i}_{j}": v for j, v in enumerate(key)})
            bound[f"t{i}"] = limit
            rows.append("(" + "".join(f"%(s{i}_{j})s, " for j in range(len(key)))
                        + f"CAST(%(t{i})s AS bigint))")
        names = ", ".join(f"c{j}" for j in range(len(next(iter(limits)))))
        return f"WITH th({names}, t) AS (VALUES {', '.join(rows)}) "

    def _candidates(self, cond: str, params: dict[str, Any],
                    strata: tuple[str, ...]) -> list[Candidate]:
        extra = "".join(f", {_STRATA[s]} AS s_{s}" for s in strata)
        rows = self._fetch(f"SELECT chat_id, version, ref, kind, actor{extra}"
                           f" FROM {{review_facts}} WHERE {cond}", params)
        return [_candidate(r, strata) for r in rows]

    def oversight(self) -> list[Row]:
        """Running figures per tool and kind: decisions `n`, `timed` (with an ask), their
        `wait_sum`, `fast` ones, and `bN`: waits of at most BUCKETS[N] (cumulative)."""
        return self._fetch("SELECT * FROM {review_oversight} ORDER BY tool, kind", {})

    def pending_by_age(self, now: datetime) -> dict[int, int]:
        """Calls awaiting a decision for longer than each of AGES seconds (0: all of them)."""
        ages = (0, *AGES)
        sums = ", ".join(f"sum(CASE WHEN asked_at <= %(t{i})s THEN 1 ELSE 0 END) AS a{i}"
                         for i in range(len(ages)))
        row = self._fetch(f"SELECT {sums} FROM {{review_calls}} WHERE waiting",
                          {f"t{i}": self._ts(now - timedelta(seconds=a))
                           for i, a in enumerate(ages)})[0]
        return {a: int(row[f"a{i}"] or 0) for i, a in enumerate(ages)}

    def actors(self, tenant: str) -> list[str]:
        """The distinct deciders of a tenant (normalised ids), the sweeper left out."""
        return [r["v"] for r in self._fetch(_ACTORS, {"t": tenant}) if r["v"] != SWEEPER]

    def reviews(self, tenant: str, limit: int = 100) -> list[ReviewSummary]:
        """The tenant's reviews, newest first."""
        rows = self._fetch("SELECT * FROM {reviews} WHERE tenant = %(t)s"
                           " ORDER BY opened_at DESC LIMIT %(n)s", {"t": tenant, "n": limit})
        return [ReviewSummary(**{**r, "opened_at": self._load_ts(r["opened_at"])}) for r in rows]

    def _fact(self, r: Row) -> ReviewFact:
        ts = {k: self._load_ts(r[k]) if r[k] is not None else None
              for k in ("asked_at", "decided_at", "viewed_at")}
        flags = {k: bool(r[k]) for k in ("requester_approved", "edited", "reasked",
                                         "fingerprint_changed", "viewed", "delegated",
                                         "delegation_active", "stage_skipped",
                                         "stage_unapproved")}
        return ReviewFact(**{**r, **ts, **flags, "input": self._load_json(r["input"])})


def _candidate(r: Row, strata: tuple[str, ...]) -> Candidate:
    return Candidate(r["chat_id"], int(r["version"]), r["ref"], r["kind"], r["actor"],
                     tuple(str(r[f"s_{s}"]) for s in strata))


def revoked(view: ReviewsView, tenant: str, active: set[str]) -> list[str]:
    """Deciders of `tenant` with no key now (`active`: the ids the keys file names)."""
    known = {normalise_id(a) for a in active}
    return [a for a in view.actors(tenant) if a not in known]


def _rank(seed: str, chat_id: str, version: int) -> bytes:
    return rank(seed, f"{chat_id}#{version}")


_ALL = 2**63 - 1  # a limit no rank exceeds
_MAX_LIMITS = 1000  # strata with a limit of their own, at most (bound values: 4 each)


def _threshold(expected: int, size: int) -> int:
    """The 64-bit rank below which `expected` of `size` uniform ranks fall on average."""
    if expected >= size:
        return _ALL
    return -(2**63) + (2**64 * expected) // size


def _isodow(ts: str | None, tz: str) -> int | None:
    return None if ts is None else datetime.fromisoformat(ts).astimezone(ZoneInfo(tz)).isoweekday()


def _clock(ts: str | None, tz: str) -> str | None:
    return None if ts is None else datetime.fromisoformat(ts).astimezone(ZoneInfo(tz)).strftime(
        "%H:%M")


class ReviewsProjection(Projection[ReviewsView]):
    """Writes the review facts and the reviews' progress."""

    name = "reviews"
    topics = tuple(c.TOPIC for c in (
        ChatStarted, UserMessageSent, AgentFingerprinted, ToolRequested, Interrupted,
        ApprovalRequested, Responded, Restarted, ApprovalVoted, InterruptExpired,
        InterruptWithdrawn, ReviewOpened, ItemAssessed, ReviewSignedOff, ReviewClosed,
        CallViewed, ChatForked, DelegationGranted, DelegationRevoked))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Other events change no review fact."""

    @process_event.register
    def _started(self, e: ChatStarted, tracking: Tracking) -> None:
        self.view.chat_started(id_text(e.originator_id), e.tenant, e.agent, e.actor)

    @process_event.register
    def _sent(self, e: UserMessageSent, tracking: Tracking) -> None:
        self.view.turn_sent(id_text(e.originator_id), e.actor)
        if e.fingerprint is not None:  # the turn's agent, as an AgentFingerprinted records it
            self.view.fingerprinted(id_text(e.originator_id), e.fingerprint)

    @process_event.register
    def _fingerprinted(self, e: AgentFingerprinted, tracking: Tracking) -> None:
        self.view.fingerprinted(id_text(e.originator_id), e.fingerprint)

    @process_event.register
    def _requested(self, e: ToolRequested, tracking: Tracking) -> None:
        self.view.tool_requested(id_text(e.originator_id), e.ref, e.name, e.input)

    @process_event.register
    def _interrupted(self, e: Interrupted, tracking: Tracking) -> None:
        self.view.asked(id_text(e.originator_id), e.ref, e.timestamp)

    @process_event.register
    def _forked(self, e: ChatForked, tracking: Tracking) -> None:
        """A fork's calls asked afresh, asked by its forker (the fork's first turn is
        theirs); none once erased before this view read it."""
        chat_id, begun = id_text(e.originator_id), e.begun()
        if begun is not None and begun.fingerprint is not None:
            self.view.fingerprinted(chat_id, begun.fingerprint)
        for call in asked_in(begun):
            self.view.tool_requested(chat_id, call.ref, call.name, call.input)
            if call.status == "interrupted" and call.interrupted_at is not None:
                terms = call.approval.terms if call.approval is not None else None
                self.view.asked(chat_id, call.ref, call.interrupted_at, _policy_ref(terms))
            if call.input_by is not None:
                self.view.edited(chat_id, call.ref, call.input_by, call.input)
            if call.approval is not None and call.approval.terms.stages is not None:
                self._staged(chat_id, call.ref, call.approval.terms,
                             call.approval.stages_apply)

    @process_event.register
    def _held(self, e: ApprovalRequested, tracking: Tracking) -> None:
        self.view.asked(id_text(e.originator_id), e.ref, e.timestamp, _policy_ref(e.terms))
        if e.terms.stages is not None:
            self._staged(id_text(e.originator_id), e.ref, e.terms, e.terms.stages_apply)

    def _staged(self, chat_id: str, ref: str, terms: ApprovalTerms,
                applying: list[bool] | None) -> None:
        stages = terms.stages or []
        self.view.staged(chat_id, ref, [s.name for s in stages],
                         list(applying) if applying is not None else [True] * len(stages))

    @process_event.register
    def _responded(self, e: Responded, tracking: Tracking) -> None:
        self._decided(e, "respond", e.actor)

    @process_event.register
    def _restarted(self, e: Restarted, tracking: Tracking) -> None:
        self._decided(e, "restart", e.actor)
        if e.replaced_input_sha256 is not None:
            self.view.edited(id_text(e.originator_id), e.ref, e.actor, e.replace_input)

    @process_event.register
    def _voted(self, e: ApprovalVoted, tracking: Tracking) -> None:
        self.view.decided(id_text(e.originator_id), e.originator_version, e.ref, e.vote,
                          e.actor, e.timestamp, e.input_sha256, e.outcome != "pending",
                          Cast(stage=e.stage, for_actor=e.for_actor,
                               delegation_id=e.delegation_id,
                               approved=e.outcome == "approved"))
        if e.edited_input_sha256 is not None:
            self.view.edited(id_text(e.originator_id), e.ref, e.actor, e.edited_input)
            if e.stages_apply is not None:
                self.view.restaged(id_text(e.originator_id), e.ref, e.stages_apply)

    @process_event.register
    def _granted(self, e: DelegationGranted, tracking: Tracking) -> None:
        self.view.delegation_granted(e)

    @process_event.register
    def _revoked(self, e: DelegationRevoked, tracking: Tracking) -> None:
        self.view.delegation_revoked(e)

    @process_event.register
    def _expired(self, e: InterruptExpired, tracking: Tracking) -> None:
        self._decided(e, "expire", SWEEPER)

    @process_event.register
    def _withdrawn(self, e: InterruptWithdrawn, tracking: Tracking) -> None:
        self._decided(e, "withdraw", e.actor)

    @process_event.register
    def _viewed(self, e: CallViewed, tracking: Tracking) -> None:
        self.view.viewed(e)

    @process_event.register
    def _opened(self, e: ReviewOpened, tracking: Tracking) -> None:
        self.view.review_opened(e)

    @process_event.register
    def _assessed(self, e: ItemAssessed, tracking: Tracking) -> None:
        self.view.item_assessed(e)

    @process_event.register
    def _signed(self, e: ReviewSignedOff, tracking: Tracking) -> None:
        self.view.review_status(id_text(e.originator_id), "signed_off", e.actor)

    @process_event.register
    def _closed(self, e: ReviewClosed, tracking: Tracking) -> None:
        self.view.review_status(id_text(e.originator_id), "closed", e.actor)

    def _decided(self, e: Any, kind: str, actor: str, settles: bool = True) -> None:
        self.view.decided(id_text(e.originator_id), e.originator_version, e.ref, kind, actor,
                          e.timestamp, e.input_sha256, settles)


READ_MODEL = ReadModel(ReviewsView, ReviewsProjection)


def _policy_ref(terms: ApprovalTerms | None) -> str | None:
    """The data policy version a call was held under, "id@n" (None: the code's policy)."""
    policy = terms.policy if terms is not None else None
    return None if policy is None else policy.label
