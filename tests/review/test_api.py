"""The review API: auditors only, tenant-scoped, typed refusals that write nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.domain.review.queries import SHIPPED
from interlock.projections import open_read_models
from tests.review.history import History

KEYS = {f"key-{name}": {"id": name, "tenant": tenant, "roles": roles} for name, tenant, roles in (
    ("alice", "acme", ["requester"]), ("bob", "acme", ["approver"]),
    ("carol", "acme", ["approver"]), ("dave", "acme", ["approver"]),
    ("rita", "acme", ["auditor"]), ("eve", "globex", ["auditor"]))}


@pytest.fixture
def http(history: History) -> Iterator[TestClient]:
    views = open_read_models(history.app, poll_interval=0.05)
    with TestClient(make_app(history.app, views, AuthConfig.from_mapping(KEYS))) as client:
        yield client
    views.close()


BIG = "9" * 400  # a Python int, too large for a float or a store's integer


def _as(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer key-{name}"}


def _run(http: TestClient, who: str, **body: Any) -> Any:
    return http.post("/v1/reviews/queries/run", json=body, headers=_as(who))


def test_an_auditor_runs_shipped_and_custom_queries(http: TestClient) -> None:
    names = [q["name"] for q in http.get("/v1/reviews/queries", headers=_as("rita")).json()]
    assert "requester_approved" in names and len(names) == len(SHIPPED)
    answer = _run(http, "rita", query="revoked_actor").json()
    assert [i["actor"] for i in answer["items"]] == ["mallory"]
    assert (answer["version"], answer["params"]) == (1, {"revoked": ["mallory"]})
    page = _run(http, "rita", query="custom", filter="kind != 'expire'", limit=4).json()
    rest = _run(http, "rita", query="custom", filter="kind != 'expire'",
                cursor=page["next_cursor"]).json()
    assert len(page["items"]) == 4 and len(rest["items"]) == 5 and rest["next_cursor"] is None


def test_another_tenant_sees_none_of_it(http: TestClient) -> None:
    assert _run(http, "eve", query="custom", filter="kind != 'expire'").json()["items"] == []
    opened = http.post("/v1/reviews", json={"query": "fast_approval", "size": 1},
                       headers=_as("rita")).json()
    answer = http.get(f"/v1/reviews/{opened['id']}", headers=_as("eve"))
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "review_not_found")


@pytest.mark.parametrize(("body", "status", "code", "says"), [
    ({"query": "custom", "filter": "amount > 5"}, 422, "invalid_filter", "unknown field"),
    ({"query": "custom", "filter": "tool = 'a' or"}, 422, "invalid_filter", "expected"),
    ({"query": "custom"}, 422, "invalid_filter", "needs a filter"),
    ({"query": "nope"}, 422, "unknown_review_query", "no review query named"),
    ({"query": "revoked_actor", "params": {"revoked": []}}, 422, "invalid_filter",
     "the server supplies"),
    ({"query": "fast_approval", "params": {"seconds": "10"}}, 422, "invalid_filter", "number"),
    ({"query": "custom", "filter": "tool = 'x'", "sql": "1"}, 422, "invalid_request", "sql"),
    ({"query": "custom", "filter": f"input.amount > {BIG}"}, 422, "invalid_filter", "2**63"),
    ({"query": "large_amount", "params": {"amount": int(BIG)}}, 422, "invalid_filter", "2**63"),
    ({"query": "fast_approval", "params": {"seconds": -int(BIG)}}, 422, "invalid_filter",
     "400 digits"),
])
def test_bad_queries_are_4xx_naming_the_problem(
    http: TestClient, body: dict[str, Any], status: int, code: str, says: str,
) -> None:
    answer = _run(http, "rita", **body)
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert says in str(answer.json()["error"])


def test_only_auditors_review(http: TestClient) -> None:
    answer = _run(http, "bob", query="fast_approval")
    assert (answer.status_code, answer.json()["error"]["details"]["role"]) == (403, "auditor")
    assert http.get("/v1/reviews/queries").status_code == 401


def test_a_review_over_http_from_opening_to_close(http: TestClient, history: History) -> None:
    opened = http.post("/v1/reviews", json={"query": "edited_then_approved", "size": 5,
                                            "seed": "s1"}, headers=_as("rita"))
    assert opened.status_code == 201
    review = opened.json()
    assert (review["sample"]["seed"], len(review["items"])) == ("s1", 1)
    url = f"/v1/reviews/{review['id']}"
    refused = http.post(f"{url}/items/1/assessment", json={"verdict": "ok"}, headers=_as("carol"))
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden")  # role
    bad = http.post(f"{url}/items/1/assessment", json={"verdict": "finding", "severity": "huge"},
                    headers=_as("rita"))
    assert bad.status_code == 422
    early = http.post(f"{url}/close", headers=_as("rita"))
    assert (early.status_code, early.json()["error"]["code"]) == (409, "review_state")
    done = http.post(f"{url}/items/1/assessment", json={
        "verdict": "finding", "severity": "medium", "note": "edited by an approver"},
        headers=_as("rita")).json()
    assert done["items"][0]["assessment"]["actor"] == "rita"
    assert http.post(f"{url}/sign-off", json={"note": "ok"}, headers=_as("rita")).status_code == 200
    closed = http.post(f"{url}/close", headers=_as("rita")).json()
    assert (closed["status"], closed["version"]) == ("closed", 4)
    listed = http.get("/v1/reviews", headers=_as("rita")).json()["items"]
    assert [(r["status"], r["findings"]) for r in listed] == [("closed", 1)]


def test_segregation_is_a_typed_403_with_the_reason(http: TestClient, history: History) -> None:
    keys = {**{k: v for k, v in KEYS.items() if k != "key-carol"},
            "key-carla": {"id": "Carol", "tenant": "acme", "roles": ["auditor"]}}
    views = open_read_models(history.app, poll_interval=0.05)
    with TestClient(make_app(history.app, views, AuthConfig.from_mapping(keys))) as other:
        review = other.post("/v1/reviews", json={"query": "edited_then_approved", "size": 1},
                            headers=_as("carla")).json()
        answer = other.post(f"/v1/reviews/{review['id']}/items/1/assessment",
                            json={"verdict": "ok"}, headers=_as("carla"))
    views.close()
    error = answer.json()["error"]
    assert (answer.status_code, error["code"]) == (403, "segregation_of_duties")
    assert error["details"]["roles"] == ["edited", "decided"]


def test_a_refused_opening_writes_nothing(http: TestClient, history: History) -> None:
    head = history.app.recorder.max_notification_id()
    for body in ({"query": "custom", "filter": "nope = 1", "size": 2},
                 {"query": "fast_approval", "size": 2, "strata": ["mood"]},
                 {"query": "fast_approval", "size": 20000},
                 {"query": "fast_approval", "size": 2, "seed": ""}):
        assert http.post("/v1/reviews", json=body, headers=_as("rita")).status_code == 422
    assert history.app.recorder.max_notification_id() == head
    assert http.get("/v1/reviews", headers=_as("rita")).json()["items"] == []


def test_a_review_asked_for_as_a_chat_is_not_found(http: TestClient, history: History) -> None:
    opened = http.post("/v1/reviews", json={"query": "edited_then_approved", "size": 5},
                       headers=_as("rita")).json()
    for path in ("", "/events"):
        answer = http.get(f"/v1/chats/{opened['id']}{path}", headers=_as("rita"))
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, "chat_not_found")
