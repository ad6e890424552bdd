"""Each shipped review query finds exactly the decisions the seeded history planted for it."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.domain.errors import InvalidFilterError, UnknownReviewQueryError
from interlock.domain.review.queries import SHIPPED, resolve
from interlock.projections import SqlReadModels
from interlock.projections.views.reviews import ReviewsView, revoked
from tests.review.history import ACTIVE, TENANT, History

Found = list[tuple[str, str, str]]


def found(h: History, view: ReviewsView, name: str, params: dict[str, Any] | None = None,
          custom: str | None = None, tenant: str = TENANT) -> Found:
    """(chat, kind, actor) of each decision the query selects, newest first."""
    if name == "revoked_actor":
        params = {"revoked": revoked(view, tenant, ACTIVE)}
    names = {str(c): n for n, c in h.chats.items()}
    page = view.facts(tenant, resolve(name, params, custom).node, 100)
    return [(names[f.chat_id], f.kind, f.actor) for f in page.items]


@pytest.mark.parametrize(("name", "params", "expected"), [
    ("fast_approval", {}, [("fast", "approve", "bob")]),
    ("fast_approval", {"seconds": 46}, [
        ("reasked", "approve", "bob"), ("fingerprint", "approve", "dave"),
        ("fingerprint", "approve", "dave"), ("fast", "approve", "bob")]),
    ("edited_then_approved", {}, [("edited", "approve", "bob")]),
    ("expired_then_reasked", {}, [("reasked", "approve", "bob")]),
    ("outside_hours", {}, [("night", "approve", "bob")]),
    ("revoked_actor", {}, [("revoked", "approve", "mallory")]),
    ("large_amount", {}, [("edited", "approve", "bob"), ("edited", "edit", "carol")]),
    ("large_amount", {"amount": 16000}, [("edited", "edit", "carol")]),
])
def test_each_shipped_query_finds_what_was_planted(
    history: History, view: ReviewsView, name: str, params: dict[str, Any], expected: Found,
) -> None:
    assert sorted(found(history, view, name, params)) == sorted(expected)


def test_the_fingerprint_query_finds_the_decision_after_the_agent_changed(
    history: History, view: ReviewsView,
) -> None:
    [(chat, kind, actor)] = found(history, view, "fingerprint_changed")
    assert (chat, kind, actor) == ("fingerprint", "approve", "dave")
    fact = view.facts(TENANT, resolve("fingerprint_changed").node, 5).items[0]
    assert fact.fingerprint_changes == 1 and fact.input == {"amount": 650}


def test_working_hours_are_the_tenants_own_time_zone(history: History, view: ReviewsView) -> None:
    """03:05 UTC is 12:05 in Tokyo (inside); 10:00 UTC is 19:00 there (outside)."""
    tokyo = found(history, view, "outside_hours", {"tz": "Asia/Tokyo"})
    assert ("night", "approve", "bob") not in tokyo
    assert ("fast", "approve", "bob") in tokyo and len(tokyo) == 8
    weekend = found(history, view, "outside_hours", {"days": "sat-sun"})
    assert len(weekend) == 9  # every decision a person made fell on a weekday


def test_the_alarm_is_empty_until_a_self_approval_is_written_into_the_store(
    history: History, models: SqlReadModels, view: ReviewsView,
) -> None:
    assert SHIPPED["requester_approved"].alarm
    assert found(history, view, "requester_approved") == []
    ref = history.app.get_chat(history.chats["self"]).state.calls
    [pending] = [c.ref for c in ref.values() if c.status == "interrupted"]
    version = history.plant_self_approval("self", pending)
    models.catch_up()
    assert found(history, view, "requester_approved") == [("self", "approve", "alice")]
    fact = view.facts(TENANT, resolve("requester_approved").node, 5).items[0]
    assert (fact.version, fact.requested_by, fact.requester_approved) == (version, "alice", True)


def test_a_custom_filter_compares_fields_input_values_and_lists(
    history: History, view: ReviewsView,
) -> None:
    rows = found(history, view, "custom", custom=(
        'tool = "pay" and input.amount >= 600 and actor != "BOB " and not kind in ("edit")'))
    assert sorted(rows) == [("fingerprint", "approve", "dave")] * 2
    assert found(history, view, "custom", custom="actor = requester") == []
    assert found(history, view, "custom", custom="input.amount = '500'") == []  # a string
    assert found(history, view, "custom", custom="input.note is null and wait_seconds < 3") \
        == [("fast", "approve", "bob")]
    assert found(history, view, "custom", custom="kind = 'expire'", tenant="other") == []


def test_the_time_fields_take_instants_with_a_zone(history: History, view: ReviewsView) -> None:
    since = history.base.isoformat()
    rows = found(history, view, "custom", custom=f'decided_at >= "{since}" and kind = "expire"')
    assert rows == [("reasked", "expire", "interlock:sweeper")]


@pytest.mark.parametrize(("text", "problem"), [
    ("tool = ", "expected a value"),
    ("tool = 'pay' and", "expected a field name"),
    ("amount > 5", "unknown field 'amount'"),
    ("wait_seconds > 'soon'", "wait_seconds compares with a number"),
    ("actor < 'bob'", "actor takes only = and !="),
    ("kind = 'approved'", "kind is one of"),
    ("decided_at > '2026-01-01'", "needs a time zone"),
    ("tool = 'pay'; DROP TABLE x", "unexpected character ';'"),
    ("input.amount = input.limit", "cannot be compared"),
    ("actor = wait_seconds", "cannot be compared"),
    ("tool = :who", "parameter :who is not given"),
    ("outside_hours('Mars/Olympus', '09:00', '17:00', 'mon-fri')", "unknown time zone"),
    ("outside_hours('UTC', '18:00', '09:00', 'mon-fri')", "start (18:00) before"),
    ("(tool = 'pay'", "expected ')'"),
    ("input.amount > 99999999999999999999999", "not a number a store can compare"),
])
def test_a_bad_filter_is_refused_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(InvalidFilterError) as refused:
        resolve("custom", custom=text)
    assert problem in refused.value.message


def test_bad_query_names_and_parameters_are_refused() -> None:
    with pytest.raises(UnknownReviewQueryError):
        resolve("approved_by_ghosts")
    with pytest.raises(InvalidFilterError, match="takes no parameter 'secs'"):
        resolve("fast_approval", {"secs": 3})
    with pytest.raises(InvalidFilterError, match="compares with a number"):
        resolve("fast_approval", {"seconds": "3"})
    with pytest.raises(InvalidFilterError, match="not a number a store can compare"):
        resolve("fast_approval", {"seconds": float("inf")})
    with pytest.raises(InvalidFilterError, match="longer than"):
        resolve("custom", custom="tool = 'x' or " * 200 + "tool = 'y'")
    with pytest.raises(InvalidFilterError, match="more than 64 conditions"):
        resolve("custom", custom=" or ".join(["tool = 'x'"] * 70))
