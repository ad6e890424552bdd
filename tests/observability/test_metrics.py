"""Metric values after a known workload."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from interlock.domain import Interlock
from interlock.projections import SqlReadModels
from interlock.projections.interface import ReadModels
from interlock.sweeper import Sweeper
from tests.api.agents import FLAKY_DOWN
from tests.observability.conftest import auth, hold_payment

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(http: TestClient) -> Samples:
    answer = http.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def flaky() -> Iterator[None]:
    FLAKY_DOWN.set()
    yield
    FLAKY_DOWN.clear()


def _chat(http: TestClient, agent: str) -> str:
    return str(http.post("/v1/chats", json={"agent": agent}, headers=auth("dana")).json()["id"])


def test_metric_values_after_a_known_workload(http: TestClient, flaky: None) -> None:
    approved, waiting, failed = (_chat(http, a) for a in ("bankingAgent", "bankingAgent",
                                                          "flakyAgent"))
    transfer = {"text": "Transfer $500 to savings."}
    for chat in (approved, waiting):
        turn = http.post(f"/v1/chats/{chat}/messages", json=transfer, headers=auth("dana"))
        assert turn.json()["finish_reason"] == "interrupted"
    [ask] = turn.json()["interrupts"]
    decide = {"respond": [{"ref": ask["ref"], "name": ask["name"], "output": {"approved": True}}]}
    done = http.post(f"/v1/chats/{approved}/resume", json=decide, headers=auth("bob"))
    assert done.json()["finish_reason"] == "stop"
    assert http.post(f"/v1/chats/{failed}/messages", json={"text": "hi"},
                     headers=auth("dana")).status_code == 502

    http.get("/v1/interrupts", headers=auth("dana"))  # waits until the views are current
    samples = scrape(http)

    assert value(samples, "interlock_decisions_total", kind="respond") == 1
    assert value(samples, "interlock_decision_seconds_count", kind="respond") == 1
    assert value(samples, "interlock_decisions_total", kind="restart") == 0
    turns = {r: value(samples, "interlock_turns_total", finish_reason=r)
             for r in ("interrupted", "stop", "failed")}
    assert turns == {"interrupted": 2, "stop": 1, "failed": 1}
    assert value(samples, "interlock_turn_seconds_count", finish_reason="stop") == 1
    assert value(samples, "interlock_pending_approvals", agent="bankingAgent",
                 tool="userApproval") == 1
    assert value(samples, "interlock_model_errors_total", provider="flaky-script") == 1
    replies = sum(e["type"] == "ModelResponded" for c in (approved, waiting)
                  for e in http.get(f"/v1/chats/{c}/events", headers=auth("dana")).json()["events"])
    calls = sum(v for (n, _), v in samples.items() if n == "interlock_model_calls_total")
    assert calls == replies > 0
    assert value(samples, "interlock_view_lag_events") == 0
    route = "/v1/chats/{chat_id}/messages"
    assert value(samples, "interlock_http_requests_total", method="POST", route=route,
                 status="200") == 2
    assert value(samples, "interlock_http_requests_total", method="POST", route=route,
                 status="502") == 1

    again = scrape(http)  # a second scrape counts nothing twice
    assert value(again, "interlock_decisions_total", kind="respond") == 1
    assert value(again, "interlock_turns_total", finish_reason="stop") == 1


def test_the_views_passes_are_counted(http: TestClient) -> None:
    before = value(scrape(http), "interlock_views_passes_total")
    assert before >= 1  # the views caught up once as the app started
    _chat(http, "bankingAgent")
    http.get("/v1/interrupts", headers=auth("dana"))  # waits for a pass that applies it
    assert value(scrape(http), "interlock_views_passes_total") > before


def _vote(http: TestClient, who: str, chat: str, held: dict[str, Any], kind: str,
          **extra: object) -> str:
    entry = {"ref": held["ref"], "name": held["name"], **extra}
    turn = http.post(f"/v1/chats/{chat}/resume", json={kind: [entry]}, headers=auth(who))
    assert turn.status_code == 200, turn.text
    return str(turn.json()["finish_reason"])


def _waits(http: TestClient) -> dict[str, list[float]]:
    """Seconds from request to decision by kind, as the decision log has them."""
    rows = http.get("/v1/decisions", headers=auth("carol")).json()["items"]
    waits: dict[str, list[float]] = {}
    for row in rows:
        wait = datetime.fromisoformat(row["decided_at"]) - datetime.fromisoformat(
            row["requested_at"])
        waits.setdefault(row["kind"], []).append(wait.total_seconds())
    return waits


def test_approval_metrics_after_a_known_workload(
    http: TestClient, service: Interlock, views: ReadModels
) -> None:
    approved, held = hold_payment(http, "payAgent")
    assert _vote(http, "tina", approved, held, "approve") == "interrupted"  # one of two
    assert _vote(http, "tom", approved, held, "approve") == "stop"
    rejected, held = hold_payment(http, "payAgent")
    assert _vote(http, "tom", rejected, held, "reject", reason="unknown payee") == "stop"
    withdrawn, held = hold_payment(http, "payAgent")
    assert _vote(http, "tina", withdrawn, held, "edit",
                 input={"amount": 400, "to": "bob-corp"}, reason="400 was agreed") == "interrupted"
    assert http.post(f"/v1/chats/{withdrawn}/withdraw", json={
        "refs": [held["ref"]], "reason": "wrong payee"}, headers=auth("root")).status_code == 200
    hold_payment(http, "payAgent")  # left waiting
    hold_payment(http, "hastyPayAgent")
    assert isinstance(views, SqlReadModels)
    sweep = Sweeper(service, views).sweep
    http.get("/v1/interrupts", headers=auth("dana"))  # waits until the views are current
    assert sweep() == 1  # the hasty approval, due since its request

    http.get("/v1/interrupts", headers=auth("dana"))
    samples = scrape(http)
    counts = {"approve": 2, "edit": 1, "reject": 1, "withdraw": 1, "expire": 1, "respond": 0}
    assert {k: value(samples, "interlock_decisions_total", kind=k) for k in counts} == counts
    assert {k: value(samples, "interlock_decision_seconds_count", kind=k)
            for k in counts} == counts
    for kind, waits in _waits(http).items():  # each observed once, from its request
        assert value(samples, "interlock_decision_seconds_sum", kind=kind) == pytest.approx(
            sum(waits), abs=1e-3)
    assert value(samples, "interlock_pending_approvals", agent="payAgent", tool="pay") == 1
    assert value(samples, "interlock_pending_approvals", agent="hastyPayAgent", tool="pay") == 0
    turns = {r: value(samples, "interlock_turns_total", finish_reason=r)
             for r in ("interrupted", "stop")}
    # five held sends; then approved, rejected, withdrawn and expired go on to the answer.
    # A vote that leaves its approval waiting (tina's approve, the edit) runs no turn.
    assert turns == {"interrupted": 5, "stop": 4}
