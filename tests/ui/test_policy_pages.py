"""The policies page over plain HTTP (no browser): only the risk role sees it, a proposal the
server refuses is shown on the form and writes nothing, a version's review shows its diff and
what-if, its proposer's approval is refused (four eyes), a form without its CSRF token is
refused. tests/ui/test_policy_change.py drives a change through Chromium."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from markupsafe import escape

from interlock.api.ui.data_policies import current, row_of
from interlock.client import Client
from interlock.domain.policy_book import PolicyDocument, PolicyVersion
from tests.api.conftest import Live
from tests.ui.test_stage_pages import Visitor

Api = Callable[[str], Client]
Visit = Callable[[str], Visitor]
LEADS = {"roles": ["lead"], "when": {"path": "amount", "op": ">", "value": 1000}}


@pytest.fixture
def visit(live: Live) -> Iterator[Visit]:
    made: list[Visitor] = []

    def open_as(name: str) -> Visitor:
        made.append(Visitor(live.url, f"key-{name}"))
        return made[-1]

    yield open_as
    for v in made:
        v.http.close()


def _propose(who: Visitor, **fields: Any) -> Any:
    who.get("/ui/policies")
    form = {"id": "pay-limits", "agent": "payAgent", "tool": "pay",
            "document": json.dumps(LEADS), "effective_from": "", "tz": "Europe/Paris",
            "reason": "the risk committee's new limits", **fields}
    return who.post("/ui/policies", form)


def _listed(api: Api) -> list[Any]:
    items: list[Any] = api("pia").request("GET", "/v1/policies")["items"]
    return items


def test_only_the_risk_role_has_the_page_and_its_link(visit: Visit) -> None:
    alice = visit("alice")
    inbox = alice.get("/ui/inbox").text
    assert "/ui/policies" not in inbox
    refused = alice.get("/ui/policies")
    assert refused.status_code == 403 and "it needs the role policy_admin" in refused.text
    pia = visit("pia").get("/ui/policies")
    assert pia.status_code == 200
    assert 'href="/ui/policies" aria-current="page">Policies</a>' in pia.text
    assert "No data policy yet in acme" in pia.text
    assert '>Policies</a>' in visit("root").get("/ui/inbox").text  # an admin's too


def test_a_refused_proposal_is_shown_on_the_form_and_writes_nothing(
    visit: Visit, api: Api
) -> None:
    pia = visit("pia")
    not_json = _propose(pia, document='{"roles": ["lead"],}')
    assert not_json.status_code == 422
    assert "Refused by the server: the policy document is not JSON: Expecting property name" \
        in not_json.text
    assert str(escape('{"roles": ["lead"],}')) in not_json.text  # kept as typed
    bad_op = _propose(pia, document=json.dumps({"when": {"path": "amount", "op": "=>",
                                                         "value": 1}}))
    assert bad_op.status_code == 422
    assert "policy refused at when.op: &#39;=&gt;&#39; is not one of" in bad_op.text
    no_tool = _propose(pia, tool="refund")
    assert no_tool.status_code == 422 and "agent payAgent has no tool &#39;refund&#39;" \
        in no_tool.text
    bad_time = _propose(pia, effective_from="next tuesday")
    assert bad_time.status_code == 422 and "effective_from is not a date or date-time" \
        in bad_time.text
    no_reason = _propose(pia, reason="  ")
    assert no_reason.status_code == 422 and "reason: String should have at least 1" \
        in no_reason.text
    bad_zone = _propose(pia, tz="Mars/Olympus")
    assert bad_zone.status_code == 422 and "tz is not a time zone" in bad_zone.text
    no_csrf = pia.http.post("/ui/policies", data={"id": "pay-limits", "agent": "payAgent",
                                                  "tool": "pay", "document": "{}",
                                                  "reason": "r"})
    assert no_csrf.status_code == 403 and "no valid CSRF token" in no_csrf.text
    alice = visit("alice")
    alice.get("/ui/inbox")
    no_role = alice.post("/ui/policies", {"id": "x", "agent": "payAgent", "tool": "pay",
                                          "document": "{}", "reason": "r"})
    assert no_role.status_code == 403
    assert _listed(api) == []  # nothing written by any refusal


def test_a_version_is_reviewed_approved_by_another_and_withdrawn(
    visit: Visit, api: Api
) -> None:
    pia = visit("pia")
    made = _propose(pia, effective_from="2026-01-01T09:30")
    assert made.status_code == 303
    assert made.headers["location"] == "/ui/policies/pay-limits/versions/1?done=proposed"
    [v1] = _listed(api)
    assert (v1["state"], v1["proposed_by"], v1["effective_from"]) == (
        "proposed", "pia", "2026-01-01T08:30:00Z")  # 09:30 in Paris, in winter
    page = pia.get(made.headers["location"]).text
    assert "Version 1 is proposed." in page
    assert "payAgent's code decides who approves pay" in page  # nothing in force: the code
    assert '<tr data-field="roles">' in page and "<code>[&#34;lead&#34;]</code>" in page
    assert 'id="whatif-counts">0 calls read' in page
    own = pia.post("/ui/policies/pay-limits/versions/1/approve", {"reason": "mine"})
    assert own.status_code == 403
    assert ("Refused by the server: pia proposed policy pay-limits version 1; someone else"
            " must approve it.") in own.text
    assert _listed(api)[0]["state"] == "proposed"
    ray = visit("ray")
    ray.get("/ui/policies/pay-limits/versions/1")
    forged = ray.http.post("/ui/policies/pay-limits/versions/1/approve", data={"reason": "x"})
    assert forged.status_code == 403 and _listed(api)[0]["state"] == "proposed"
    done = ray.post("/ui/policies/pay-limits/versions/1/approve", {"reason": "reviewed"})
    assert done.headers["location"] == "/ui/policies/pay-limits/versions/1?done=approved"
    page = ray.get(done.headers["location"]).text
    assert 'data-state="in_force">approved, in force from' in page
    assert "This version is the one in force" in page
    again = ray.post("/ui/policies/pay-limits/versions/1/approve", {})
    assert again.status_code == 409 and "is approved: it cannot be approved" in again.text
    listing = ray.get("/ui/policies").text
    assert 'data-version="1" data-state="in_force"' in listing and "by ray at" in listing

    # the next version, prefilled from the one in force, diffs against it field by field
    form = ray.get("/ui/policies?policy=pay-limits").text
    assert str(escape('"lead"')) in form and 'value="pay-limits"' in form
    ray.post("/ui/policies", {"id": "pay-limits", "agent": "payAgent", "tool": "pay",
                              "document": json.dumps({**LEADS, "roles": ["cfo"],
                                                      "quorum": 2}),
                              "tz": "UTC", "reason": "the CFO decides"})
    review = pia.get("/ui/policies/pay-limits/versions/2").text
    assert "Changes from version 1, in force now" in review
    assert [f for f in ("roles", "quorum", "when.value") if f'data-field="{f}"' in review] \
        == ["roles", "quorum"]
    assert "<code>[&#34;lead&#34;]</code></td><td class=\"new\"><code>[&#34;cfo&#34;]" in review
    assert "<code>1</code></td><td class=\"new\"><code>2</code>" in review
    blank = pia.post("/ui/policies/pay-limits/versions/2/withdraw", {"reason": " "})
    assert blank.status_code == 422 and "say why the version is withdrawn" in blank.text
    gone = pia.post("/ui/policies/pay-limits/versions/2/withdraw", {"reason": "not now"})
    assert gone.status_code == 303
    page = pia.get(gone.headers["location"]).text
    assert "withdrawn by pia at" in page and "Approve version 2" not in page
    assert [v["state"] for v in _listed(api)] == ["approved", "withdrawn"]
    missing = pia.get("/ui/policies/pay-limits/versions/9")
    assert missing.status_code == 404 and "policy pay-limits version 9 not found" in missing.text


def test_each_state_of_a_version_reads_in_words() -> None:
    """Proposed, in force, scheduled, superseded and withdrawn, as the list shows them."""
    at = datetime(2026, 6, 1, 12, tzinfo=UTC)
    day = timedelta(days=1)

    def version(n: int, effective: datetime, approved: bool = True,
                withdrawn: bool = False) -> PolicyVersion:
        return PolicyVersion(
            id="p", version=n, agent="payAgent", tool="pay", document=PolicyDocument(),
            effective_from=effective, proposed_by="pia", proposed_at=at - 9 * day,
            reason="r", approved_by="ray" if approved else None,
            approved_at=at - 8 * day if approved else None,
            withdrawn_by="pia" if withdrawn else None,
            withdrawn_at=at - day if withdrawn else None,
            withdraw_reason="no" if withdrawn else None)

    versions = [version(1, at - 7 * day), version(2, at - 5 * day),
                version(3, at - 4 * day, withdrawn=True), version(4, at + day),
                version(5, at + 2 * day, approved=False)]
    live = current(versions, at)
    assert live is not None and live.version == 2
    assert [(r.state, r.words) for r in (row_of(v, live, at) for v in versions)] == [
        ("superseded", "approved, in force from 2026-05-25 12:00:00 UTC; superseded by"
                       " version 2"),
        ("in_force", "approved, in force from 2026-05-27 12:00:00 UTC"),
        ("withdrawn", "withdrawn by pia at 2026-05-31 12:00:00 UTC: no"),
        ("scheduled", "approved, scheduled: in force from 2026-06-02 12:00:00 UTC"),
        ("proposed", "proposed, waiting for a second person's approval (then in force from"
                     " 2026-06-03 12:00:00 UTC at the earliest)")]
