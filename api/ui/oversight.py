"""Oversight figures for the console, per tenant and under the statistics page's filters:
time to decision per tool and per approver, rejection and edit rates, the share of fast
approvals, and the calls pending by age.

They come from the decision log's summary (counts per day, tool, actor, kind and log-scale
wait bucket, kept by its projection: projections/views/decision_stats.py), so a page reads a
few rows, never the log; a quantile is estimated inside its bucket (within 9 %). The pending
counts come from the inbox.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from interlock.api.errors import ViewsBehindError
from interlock.domain import Interlock
from interlock.projections.interface import DecisionFilter, DecisionStats, ReadModels
from interlock.projections.views.decision_stats import Histogram, bucket_bounds
from interlock.projections.views.decisions import DecisionsView
from interlock.projections.views.inbox import InboxView
from interlock.projections.views.review_tables import AGES, FAST

PEOPLE = ("approve", "respond", "restart", "edit", "reject")  # a person decided
APPROVALS = ("approve", "respond")
EDITS = ("edit", "restart")
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
PENDING_AGES = (0, *AGES)
# Fast: the bucket ends by FAST seconds (a wait in the last 4 % before it counts as slow).
FAST_BUCKETS = max(b for b in range(400) if bucket_bounds(b)[1] <= FAST * 1000)


@dataclass(frozen=True)
class Spread:
    """How long one tool's or one approver's decisions took: quantiles in seconds."""

    label: str
    n: int
    p5: float
    p25: float
    p50: float
    p75: float
    p95: float


@dataclass(frozen=True)
class Rates:
    """People's decisions on one tool: how many were rejections, edits, fast approvals."""

    tool: str
    decided: int
    rejected: int
    edited: int
    approved: int
    fast: int

    @property
    def rejection(self) -> float:
        return self.rejected / self.decided if self.decided else 0.0

    @property
    def edit(self) -> float:
        return self.edited / self.decided if self.decided else 0.0

    @property
    def fast_share(self) -> float:
        return self.fast / self.approved if self.approved else 0.0


@dataclass(frozen=True)
class Oversight:
    by_tool: list[Spread]
    by_approver: list[Spread]
    rates: list[Rates]
    pending: list[tuple[int, int]]  # (older than, seconds; how many)


def figures(groups: Iterable[Mapping[str, Any]], pending: Mapping[int, int]) -> Oversight:
    """The figures of summary groups (tool, actor, kind, bucket, n) and pending counts."""
    people = [g for g in groups if g["kind"] in PEOPLE]
    return Oversight(by_tool=_spreads(people, "tool"), by_approver=_spreads(people, "actor"),
                     rates=_rates(people), pending=sorted(pending.items()))


def _spreads(groups: list[Mapping[str, Any]], key: str) -> list[Spread]:
    found: dict[str, list[Mapping[str, Any]]] = {}
    for g in groups:
        found.setdefault(str(g[key]), []).append(g)
    spreads = []
    for label, mine in sorted(found.items()):
        h = Histogram.of(mine)
        p5, p25, p50, p75, p95 = (h.percentile(q) or 0.0 for q in QUANTILES)
        spreads.append(Spread(label, h.total, p5, p25, p50, p75, p95))
    return spreads


def _rates(groups: list[Mapping[str, Any]]) -> list[Rates]:
    tools: dict[str, dict[str, int]] = {}
    for g in groups:
        t = tools.setdefault(str(g["tool"]), dict.fromkeys(("n", "reject", "edit", "ok",
                                                              "fast"), 0))
        n, kind = int(g["n"]), g["kind"]
        t["n"] += n
        t["reject"] += n if kind == "reject" else 0
        t["edit"] += n if kind in EDITS else 0
        t["ok"] += n if kind in APPROVALS else 0
        t["fast"] += n if kind in APPROVALS and int(g["bucket"]) <= FAST_BUCKETS else 0
    return [Rates(tool, t["n"], t["reject"], t["edit"], t["ok"], t["fast"])
            for tool, t in sorted(tools.items())]


def read(service: Interlock, views: ReadModels, f: DecisionFilter
         ) -> tuple[DecisionStats, Oversight]:
    """The statistics and the figures, from one read of the summary, once the views show
    every write before the request."""
    try:
        views.wait(service.position(), views=("decisions", "inbox"))
    except TimeoutError:
        raise ViewsBehindError() from None
    # The console's filter names the visitor's tenant; none (no tenant is empty) counts none.
    pending = views.view(InboxView).ages(f.tenant or "", datetime.now(UTC), PENDING_AGES)
    decisions = views.view(DecisionsView)
    groups = decisions.groups(f)
    return decisions.stats(f, groups), figures(groups, pending)
