"""The console's oversight charts: server-drawn SVG whose numbers are those of a known
history (tests/review/history.py plus one rejection), with a title and a description."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import timedelta

import pytest
from markupsafe import Markup

from interlock.api.ui import oversight
from interlock.api.ui.charts import LEFT, RIGHT, WIDTH, oversight_charts, time_x
from interlock.domain import RejectEntry
from interlock.projections import SqlReadModels
from interlock.projections.interface import DecisionFilter
from interlock.projections.views.decisions import DecisionsView
from tests.review.history import TENANT, History

SVG = "{http://www.w3.org/2000/svg}"
BAR_SPAN = WIDTH - LEFT - RIGHT - 70


@pytest.fixture
def charts(history: History, models: SqlReadModels) -> dict[str, ET.Element]:
    ten = history.base + timedelta(hours=10)
    ref = history.ask("rejected", 900, ten)
    history.vote("rejected", "carol", RejectEntry(ref=ref, name="pay", reason="no"),
                 ten + timedelta(seconds=8))
    models.catch_up()
    stats, figures = oversight.read(history.app, models, DecisionFilter(tenant=TENANT))
    # one read of the summary serves both: the statistics are what the view computes alone
    assert stats == models.view(DecisionsView).stats(DecisionFilter(tenant=TENANT))
    return {k: ET.fromstring(str(v)) for k, v in oversight_charts(figures).items()}


def _marks(svg: ET.Element, kind: str) -> dict[str, dict[str, str]]:
    return {g.get("data-label", ""): dict(g.attrib) for g in svg.iter(f"{SVG}g")
            if g.get("class") == kind}


def test_each_chart_is_an_image_with_a_title_and_a_description(
    charts: dict[str, ET.Element],
) -> None:
    for svg in charts.values():
        title, desc = svg.find(f"{SVG}title"), svg.find(f"{SVG}desc")
        assert svg.get("role") == "img" and title is not None and desc is not None
        assert svg.get("aria-labelledby") == f"{title.get('id')} {desc.get('id')}"
    assert "<script" not in "".join(ET.tostring(s, encoding="unicode") for s in charts.values())


def test_time_to_decision_per_tool_and_approver(charts: dict[str, ET.Element]) -> None:
    """People's decisions only (the sweeper's expiry is not one): bob approved after 2 s,
    40 s, 60 s, 120 s and 5 min, dave twice after 45 s, mallory after 50 s, carol edited
    after 30 s and rejected after 8 s. A percentile is read from the log histogram: within
    9 % of a recorded wait."""
    tools = _marks(charts["by_tool"], "box")
    assert {k: v["data-n"] for k, v in tools.items()} == {"pay": "10"}
    people = _marks(charts["by_approver"], "box")
    assert {k: int(v["data-n"]) for k, v in people.items()} == {
        "bob": 5, "carol": 2, "dave": 2, "mallory": 1}
    for who, median in (("bob", 60), ("dave", 45), ("mallory", 50)):
        assert float(people[who]["data-p50"]) == pytest.approx(median, rel=0.09)
    assert float(people["bob"]["data-p5"]) == pytest.approx(2, rel=0.09)
    bob = next(g for g in charts["by_approver"].iter(f"{SVG}g")
               if g.get("data-label") == "bob")
    [line] = [e for e in bob if e.get("class") == "median"]
    assert float(line.get("x1", "")) == time_x(float(people["bob"]["data-p50"]))
    assert time_x(1) < float(line.get("x1", "")) < time_x(3600)


def test_rates_fast_approvals_and_pending_by_age(charts: dict[str, ET.Element]) -> None:
    """10 decisions by people: 1 rejection, 1 edit; of 8 approvals one (2 s) was fast. One
    call (asked days ago) still waits."""
    for key, value, text in (("rejection", 0.1, "10% of 10"), ("edit", 0.1, "10% of 10"),
                             ("fast", 0.125, "12% of 8")):
        [bar] = [g for g in charts[key].iter(f"{SVG}g") if g.get("data-label") == "pay"]
        assert float(bar.get("data-value", "")) == value
        rect, label = bar.find(f"{SVG}rect"), bar.findall(f"{SVG}text")[-1]
        assert rect is not None and float(rect.get("width", "")) == round(BAR_SPAN * value, 1)
        assert label.text == text
    pending = _marks(charts["pending"], "bar")
    assert list(pending) == ["all pending", "over 1 min", "over 5 min", "over 15 min",
                             "over 1 h", "over 4 h", "over 1 day(s)"]
    assert {v["data-value"] for v in pending.values()} == {"1.0000"}


def test_labels_are_escaped() -> None:
    figures = oversight.figures(
        [{"tool": "<b>x</b>", "actor": 'a"b', "kind": "approve", "bucket": 90, "n": 1}], {0: 0})
    drawn = oversight_charts(figures)
    assert all(isinstance(v, Markup) for v in drawn.values())
    assert "<b>" not in drawn["by_tool"] and "&lt;b&gt;" in drawn["by_tool"]
    ET.fromstring(str(drawn["by_approver"]))  # still well-formed
