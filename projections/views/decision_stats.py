"""The decision statistics summary: counts per day kept by the decisions projection.

`GET /v1/decisions/stats` over a tenant of a million decisions must not scan them per
request. The decisions projection keeps one row per (tenant, UTC day, agent, tool, actor,
kind, wait bucket) with a count, in the same transaction as the decision row, so the
summary is exact for counts and never stale (it is part of the view). A request sums the
whole days of its range from the summary and reads only the partial days at its edges
from the decisions themselves (a bounded, indexed range).

Time to decision is kept as a log histogram: bucket 0 holds waits under 1 ms, bucket b
waits in [2^((b-1)/8), 2^(b/8)) ms, so each bucket spans 9 % and a percentile estimated
inside one is within 9 % of the exact value. Up to `EXACT_UP_TO` matching decisions the
percentiles are computed exactly from the rows instead.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from interlock.projections.engine.sql import Dialect

PER_DOUBLING = 8
EXACT_UP_TO = 1000

STATS_DDL = (
    "CREATE TABLE IF NOT EXISTS {decision_stats} (tenant text NOT NULL, day text NOT NULL,"
    " agent text NOT NULL, tool text NOT NULL, actor text NOT NULL, kind text NOT NULL,"
    " bucket integer NOT NULL, n bigint NOT NULL,"
    " PRIMARY KEY (tenant, day, agent, tool, actor, kind, bucket))",
)

_WAIT = {
    "postgresql": "extract(epoch FROM decided_at - requested_at)::float8",
    "sqlite": "((julianday(decided_at) - julianday(requested_at)) * 86400.0)",
}
_DAY = {
    "postgresql": "to_char(decided_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
    "sqlite": "substr(decided_at, 1, 10)",
}


def bucket_sql(dialect: Dialect) -> str:
    """The wait bucket of a decisions row, in SQL (the same formula as `bucket`)."""
    w = _WAIT[dialect]
    return (f"(CASE WHEN {w} < 0.001 THEN 0"
            f" ELSE CAST(floor({PER_DOUBLING} * ln({w} * 1000) / ln(2)) AS integer) + 1 END)")


def record_sql(dialect: Dialect) -> str:
    """Count the decision (chat, version) just inserted into the summary."""
    return ("INSERT INTO {decision_stats} AS s (tenant, day, agent, tool, actor, kind, bucket, n)"
            f" SELECT tenant, {_DAY[dialect]}, agent, tool, actor, kind, {bucket_sql(dialect)},"
            " 1 FROM {decisions} WHERE chat_id = %(c)s AND version = %(v)s"
            " ON CONFLICT (tenant, day, agent, tool, actor, kind, bucket)"
            " DO UPDATE SET n = s.n + excluded.n")


def backfill_sql(dialect: Dialect) -> str:
    """Summarise decisions recorded before the summary existed (an upgraded store)."""
    return ("INSERT INTO {decision_stats} (tenant, day, agent, tool, actor, kind, bucket, n)"
            f" SELECT tenant, {_DAY[dialect]} AS d, agent, tool, actor, kind,"
            f" {bucket_sql(dialect)} AS b, count(*) FROM {{decisions}}"
            " WHERE NOT EXISTS (SELECT 1 FROM {decision_stats})"
            " GROUP BY tenant, d, agent, tool, actor, kind, b")


def raw_groups_sql(dialect: Dialect, where: str) -> str:
    """Counts by tool, actor, kind and bucket straight from the decisions `where` selects."""
    return (f"SELECT tool, actor, kind, {bucket_sql(dialect)} AS bucket, count(*) AS n"
            f" FROM {{decisions}}{where} GROUP BY tool, actor, kind, bucket")


def summary_groups_sql(where: str) -> str:
    return ("SELECT tool, actor, kind, bucket, sum(n) AS n FROM {decision_stats}"
            f"{where} GROUP BY tool, actor, kind, bucket")


@dataclass(frozen=True)
class Split:
    """A time range as whole UTC days (from the summary) and partial edges (from rows)."""

    days: tuple[str | None, str | None] | None  # [first, last) as YYYY-MM-DD; None: no days
    edges: tuple[tuple[datetime | None, datetime | None], ...]  # [since, until) ranges


def split(since: datetime | None, until: datetime | None) -> Split:
    """Whole days inside [since, until), and what is left at either end."""
    first = None if since is None else _ceil_day(since)
    last = None if until is None else until.astimezone(UTC).date()
    if since is not None and first is None:  # on the calendar's last day: no whole day after
        return Split(None, ((since, until),))
    if first is not None and last is not None and first >= last:
        return Split(None, ((since, until),))
    edges = []
    if since is not None and first is not None and _midnight(first) > since:
        edges.append((since, _midnight(first)))
    if until is not None and last is not None and _midnight(last) < until:
        edges.append((_midnight(last), until))
    return Split((_iso(first), _iso(last)), tuple(edges))


def _ceil_day(at: datetime) -> date | None:
    """The first UTC day starting at or after `at`; None past the calendar's last midnight."""
    day = at.astimezone(UTC).date()
    if _midnight(day) == at:
        return day
    return None if day == date.max else day + timedelta(days=1)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), UTC)


def _iso(day: date | None) -> str | None:
    return None if day is None else day.isoformat()


@dataclass
class Histogram:
    """Counts by tool and actor, and the wait histogram, summed over groups."""

    by_tool: Counter[str]
    by_actor: Counter[str]
    buckets: Counter[int]

    @classmethod
    def of(cls, groups: Iterable[Mapping[str, object]]) -> Histogram:
        h = cls(Counter(), Counter(), Counter())
        for g in groups:
            n = int(g["n"])  # type: ignore[call-overload]
            h.by_tool[str(g["tool"])] += n
            h.by_actor[str(g["actor"])] += n
            h.buckets[int(g["bucket"])] += n  # type: ignore[call-overload]
        return h

    @property
    def total(self) -> int:
        return sum(self.by_tool.values())

    def percentile(self, q: float) -> float | None:
        """The wait (seconds) at quantile `q`, interpolated inside its bucket."""
        if not self.total:
            return None
        rank, seen = q * (self.total - 1), 0
        for b in sorted(self.buckets):
            n = self.buckets[b]
            if rank < seen + n:
                low, high = bucket_bounds(b)
                return (low + (high - low) * (rank - seen + 0.5) / n) / 1000
            seen += n
        return bucket_bounds(max(self.buckets))[1] / 1000


def bucket(wait_seconds: float) -> int:
    """The histogram bucket of a wait (as `bucket_sql` computes it)."""
    ms = wait_seconds * 1000
    return 0 if ms < 1 else math.floor(PER_DOUBLING * math.log(ms) / math.log(2)) + 1


def bucket_bounds(b: int) -> tuple[float, float]:
    """The waits (ms) bucket `b` covers."""
    if b == 0:
        return 0.0, 1.0
    return 2 ** ((b - 1) / PER_DOUBLING), 2 ** (b / PER_DOUBLING)
