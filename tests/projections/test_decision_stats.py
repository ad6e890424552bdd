"""The statistics summary: whole days from the summary, edges from the rows, same answers."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels
from interlock.projections.interface import DecisionFilter, DecisionStats
from interlock.projections.views.decision_stats import Histogram, Split, bucket, split
from interlock.projections.views.decisions import DecisionsView
from interlock.projections.views.stats import percentile
from tests.projections.flows import seed

pytestmark = pytest.mark.anyio

DAY = datetime(2025, 3, 4, tzinfo=UTC)


def test_a_range_splits_into_whole_days_and_partial_edges() -> None:
    assert split(None, None) == Split((None, None), ())
    assert split(DAY, DAY + timedelta(days=2)) == Split(("2025-03-04", "2025-03-06"), ())
    noon = DAY + timedelta(hours=12)
    assert split(noon, noon + timedelta(days=2)) == Split(
        ("2025-03-05", "2025-03-06"),
        ((noon, DAY + timedelta(days=1)), (DAY + timedelta(days=2), noon + timedelta(days=2))))
    hour = noon + timedelta(hours=1)
    assert split(noon, hour) == Split(None, ((noon, hour),))
    assert split(noon, None) == Split(("2025-03-05", None), ((noon, DAY + timedelta(days=1)),))


def test_estimated_percentiles_are_within_a_bucket_of_the_exact_ones() -> None:
    rng = random.Random(7)
    waits = sorted(rng.lognormvariate(3, 2) for _ in range(20_000))
    counts: dict[int, int] = {}
    for w in waits:
        counts[bucket(w)] = counts.get(bucket(w), 0) + 1
    h = Histogram.of({"tool": "t", "actor": "a", "bucket": b, "n": n} for b, n in counts.items())
    for q in (0.5, 0.95):
        exact, estimate = percentile(waits, q), h.percentile(q)
        assert exact is not None and estimate is not None
        assert abs(estimate - exact) <= 0.091 * exact


def _both(models: SqlReadModels, f: DecisionFilter) -> tuple[DecisionStats, DecisionStats]:
    """The stats as the summary estimates them, and computed exactly from the rows."""
    view = models.view(DecisionsView)
    view.exact_up_to = -1
    estimated = view.stats(f)
    view.exact_up_to = 10**9
    return estimated, view.stats(f)


def _same_counts(a: DecisionStats, b: DecisionStats) -> bool:
    return (a.total, a.by_tool, a.by_actor) == (b.total, b.by_tool, b.by_actor)


async def test_summary_and_rows_agree_for_whole_days_and_edges(
    app: Interlock, models: SqlReadModels
) -> None:
    _, position = await seed(app)
    models.wait(position)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    for f in (DecisionFilter(), DecisionFilter(tenant="bank"), DecisionFilter(since=today),
              DecisionFilter(since=an_hour_ago, tenant="bank", actor="bob"),
              DecisionFilter(until=today + timedelta(days=1)),
              DecisionFilter(since=today - timedelta(days=3), until=today)):
        estimated, exact = _both(models, f)
        assert _same_counts(estimated, exact), f
        if exact.total:  # a handful of waits: the estimate only stays in their range
            assert estimated.p50_seconds is not None and estimated.p95_seconds is not None
            assert 0 <= estimated.p50_seconds <= estimated.p95_seconds
    assert _both(models, DecisionFilter(tenant="bank"))[1].total == 5


async def test_a_store_without_a_summary_gets_one_from_its_decisions(
    app: Interlock, models: SqlReadModels
) -> None:
    _, position = await seed(app)
    models.wait(position)
    view = models.view(DecisionsView)
    before = view.stats(DecisionFilter())
    with view.batch(view.position(), view.position()):  # as a store from before the summary
        view._run("DELETE FROM {decision_stats}", {})
    assert view.stats(DecisionFilter()).total == 0
    view.setup()
    assert view.stats(DecisionFilter()) == before
