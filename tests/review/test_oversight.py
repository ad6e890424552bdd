"""Oversight figures at /metrics: per tool, from the reviews view's running totals."""

from __future__ import annotations

import re
from datetime import timedelta

from fastapi.testclient import TestClient

from interlock.api.app import make_app
from interlock.projections import SqlReadModels
from interlock.projections.views.reviews import ReviewsView
from tests.review.history import History


def _value(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert found is not None, name
    return float(found.group(1))


def test_time_to_decision_rates_and_fast_approvals_per_tool(
    history: History, models: SqlReadModels,
) -> None:
    with TestClient(make_app(history.app, models)) as http:
        text = http.get("/metrics").text
    # pay: 8 approvals (one within 10 s), 1 edit, no rejection; waits 2..300 s
    assert _value(text, 'interlock_oversight_decision_seconds_count{tool="pay"}') == 9
    assert _value(text, 'interlock_oversight_decision_seconds_bucket{le="5",tool="pay"}') == 1
    assert _value(text, 'interlock_oversight_decision_seconds_bucket{le="60",tool="pay"}') == 7
    assert _value(text, 'interlock_oversight_fast_approval_ratio{tool="pay"}') == 1 / 8
    assert _value(text, 'interlock_oversight_edit_ratio{tool="pay"}') == 1 / 9
    assert _value(text, 'interlock_oversight_rejection_ratio{tool="pay"}') == 0
    # one call waits (asked days ago): the self chat's; the edited one settled on approval
    for age in ("0", "60", "86400"):
        assert _value(text, f'interlock_oversight_pending{{older_than="{age}"}}') == 1


def test_the_running_totals_survive_a_rebuild(history: History, models: SqlReadModels) -> None:
    view = models.view(ReviewsView)
    before = view.oversight()
    models.runner("reviews").rebuild()
    assert view.oversight() == before and sum(int(r["n"]) for r in before) == 10


def test_pending_by_age_counts_from_the_ask(history: History, view: ReviewsView) -> None:
    asked = history.base + timedelta(days=2, hours=10)
    assert view.pending_by_age(asked + timedelta(seconds=30)) == {
        0: 1, 60: 0, 300: 0, 900: 0, 3600: 0, 14400: 0, 86400: 0}
    assert view.pending_by_age(asked + timedelta(seconds=1000))[900] == 1
