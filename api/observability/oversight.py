"""Oversight figures at `/metrics`, from the reviews read model's running totals (one row
per tool and kind, kept by its projection, so a scrape reads a few rows, not the log):
time to decision per tool, rejection and edit rates, the share of fast approvals, and the
calls awaiting a decision by age."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import PersistenceError
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from interlock.domain.errors import UnavailableError
from interlock.projections.engine.interface import ReadSide
from interlock.projections.views.review_tables import BUCKETS, FAST
from interlock.projections.views.reviews import ReviewsView

APPROVALS = ("approve", "respond")
PEOPLE = ("approve", "respond", "restart", "edit", "reject")  # a person decided


class Oversight(Collector):
    """Read when scraped; nothing when the read models keep no reviews view."""

    def __init__(self, views: ReadSide) -> None:
        self.views = views

    def collect(self) -> Iterator[Metric]:
        view = self.views.find(ReviewsView)
        if view is None:
            return
        try:
            rows, pending = view.oversight(), view.pending_by_age(datetime.now(UTC))
        except (UnavailableError, PersistenceError):
            return
        yield _waits(rows)
        yield from _rates(rows)
        ages = GaugeMetricFamily("interlock_oversight_pending",
                                 "Calls awaiting a decision for longer than `older_than` s",
                                 labels=["older_than"])
        for age, n in pending.items():
            ages.add_metric([str(age)], n)
        yield ages


def _waits(rows: list[Any]) -> Metric:
    family = HistogramMetricFamily("interlock_oversight_decision_seconds",
                                   "Time from the ask to a person's decision, per tool",
                                   labels=["tool"])
    tools: dict[str, list[float]] = {}
    for r in rows:
        if r["kind"] in PEOPLE:
            total = tools.setdefault(r["tool"], [0.0] * (len(BUCKETS) + 2))
            for i in range(len(BUCKETS)):
                total[i] += r[f"b{i}"]
            total[-2] += r["timed"]
            total[-1] += r["wait_sum"]
    for tool, total in sorted(tools.items()):
        buckets = [(str(b), total[i]) for i, b in enumerate(BUCKETS)]
        family.add_metric([tool], [*buckets, ("+Inf", total[-2])], total[-1])
    return family


def _rates(rows: list[Any]) -> Iterator[Metric]:
    by_tool: dict[str, dict[str, Any]] = {}
    for r in rows:
        by_tool.setdefault(r["tool"], {})[r["kind"]] = r
    rejection = GaugeMetricFamily("interlock_oversight_rejection_ratio",
                                  "Rejections among people's decisions, per tool", labels=["tool"])
    edits = GaugeMetricFamily("interlock_oversight_edit_ratio",
                              "Edits among people's decisions, per tool", labels=["tool"])
    fast = GaugeMetricFamily("interlock_oversight_fast_approval_ratio",
                             f"Approvals within {FAST} s of the ask, among approvals",
                             labels=["tool"])
    for tool, kinds in sorted(by_tool.items()):
        decided = sum(int(kinds[k]["n"]) for k in PEOPLE if k in kinds)
        approved = sum(int(kinds[k]["n"]) for k in APPROVALS if k in kinds)
        quick = sum(int(kinds[k]["fast"]) for k in APPROVALS if k in kinds)
        if decided:
            rejection.add_metric([tool], _n(kinds, "reject") / decided)
            edits.add_metric([tool], (_n(kinds, "edit") + _n(kinds, "restart")) / decided)
        if approved:
            fast.add_metric([tool], quick / approved)
    yield from (rejection, edits, fast)


def _n(kinds: dict[str, Any], kind: str) -> int:
    return int(kinds[kind]["n"]) if kind in kinds else 0
