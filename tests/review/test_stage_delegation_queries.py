"""Review queries of issue 42: a stage skipped (`stage_skipped`; the alarm
`stage_unapproved`) and a delegate's votes (`delegate_votes`; the alarm
`delegation_not_in_force`), over HTTP from real flows on SQLite and PostgreSQL, and the
alarms' conditions (which the rules never let happen) fed to the view directly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import httpx

from interlock.domain.delegations import DelegationGranted, DelegationRevoked, delegations_id
from interlock.domain.review.queries import SHIPPED
from interlock.projections.views.reviews import Cast, ReviewsView
from tests.api.conftest import ClientFor, Live, client_for, live  # noqa: F401 - fixtures
from tests.api.test_approvals import _away, _held, _vote_by, _wire
from tests.projections.conftest import dumps, rebuilt


def _run(server: Live, query: str, chats: set[str]) -> list[dict[str, Any]]:
    server.views.catch_up()
    with httpx.Client(base_url=server.url) as http:
        answer = http.post("/v1/reviews/queries/run", json={"query": query, "limit": 100},
                           headers={"Authorization": "Bearer key-carol"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["version"] == SHIPPED[query].version == 1
    return [i for i in answer.json()["items"] if i["chat_id"] in chats]


def test_a_stage_skipped_by_its_when_is_found_and_a_full_pass_is_not(
    live: Live, client_for: ClientFor  # noqa: F811
) -> None:
    small, held = _wire(client_for, 5000)  # the CFO's stage does not apply under 100,000
    client_for("lee").open_chat(small.id).decide(held.approve())
    client_for("tina").open_chat(small.id).decide(held.approve())
    big, held2 = _wire(client_for, 150_000)  # every stage applies and is approved
    for who in ("lee", "tina", "cora"):
        client_for(who).open_chat(big.id).decide(held2.approve())
    chats = {small.id, big.id}
    found = _run(live, "stage_skipped", chats)
    assert [(f["chat_id"], f["actor"], f["stage"], f["stage_skipped"],
             f["stage_unapproved"]) for f in found] == [
        (small.id, "tina", "treasury", True, False)]  # the approving vote, not lee's
    assert _run(live, "stage_unapproved", chats) == []
    assert dumps(live.views) == rebuilt(live.service)


def test_an_edit_that_adds_a_stage_is_no_skip_once_that_stage_approves(
    live: Live, client_for: ClientFor  # noqa: F811
) -> None:
    chat, held = _wire(client_for, 5000)
    client_for("lee").open_chat(chat.id).decide(held.approve())
    edited = client_for("tina").open_chat(chat.id).decide(
        held.edit({"amount": 200_000, "to": "bob-corp"}, "the full invoice"))
    again = edited.interrupts[0]
    for who in ("lee", "tom", "cora"):  # stage one again on the new input, then the CFO too
        client_for(who).open_chat(chat.id).decide(again.approve())
    assert _run(live, "stage_skipped", {chat.id}) == []


def test_a_delegates_votes_name_delegator_delegate_delegation_and_whether_in_force(
    live: Live, client_for: ClientFor  # noqa: F811
) -> None:
    made = _away(client_for, "tina", "dana", roles=["treasury"])
    chat, held = _held(client_for)
    _vote_by(client_for, "dana", chat.id, held, made["id"])
    client_for("tom").open_chat(chat.id).decide(held.approve())
    [vote] = _run(live, "delegate_votes", {chat.id})
    assert (vote["actor"], vote["for_actor"], vote["delegation_id"], vote["delegated"],
            vote["delegation_active"]) == ("dana", "tina", made["id"], True, True)
    assert _run(live, "delegation_not_in_force", {chat.id}) == []
    with httpx.Client(base_url=live.url) as http:  # for_actor is a principal field
        answer = http.post("/v1/reviews/queries/run", json={
            "query": "custom", "filter": 'for_actor = "TINA "'},
            headers={"Authorization": "Bearer key-carol"})
    assert [i["actor"] for i in answer.json()["items"] if i["chat_id"] == chat.id] == ["dana"]


def _fed(view: ReviewsView, write: Any) -> None:
    """Events the rules would refuse, written into the view as its projection would."""
    position = view.position()
    with view.batch(position, position + 1):
        write()


def test_the_alarms_find_what_the_rules_never_let_happen(live: Live) -> None:  # noqa: F811
    view = live.views.view(ReviewsView)
    live.views.catch_up()
    chat, at = f"alarm-{uuid4()}", datetime.now(UTC)
    granted = DelegationGranted(
        originator_id=delegations_id("acme"), originator_version=1, timestamp=at,
        tenant="acme", delegation_id=uuid4(), delegator="tina", delegate="dana",
        roles=["treasury"], starts_at=at - timedelta(hours=1), ends_at=at + timedelta(days=1))
    revoked = DelegationRevoked(originator_id=delegations_id("acme"), originator_version=2,
                                timestamp=at, tenant="acme",
                                delegation_id=granted.delegation_id, actor="tina")

    def write() -> None:
        view.chat_started(chat, "acme", "wireAgent", "alice")
        view.tool_requested(chat, "r1", "wire", {"amount": 5})
        view.asked(chat, "r1", at)
        view.staged(chat, "r1", ["team lead", "treasury"], [True, True])
        view.delegation_granted(granted)
        view.delegation_revoked(revoked)
        # the last stage approves the call, by a delegation revoked before: stage one never
        view.decided(chat, 3, "r1", "approve", "dana", at + timedelta(seconds=1), "0" * 64,
                     cast=Cast(stage=1, for_actor="tina",
                               delegation_id=str(granted.delegation_id), approved=True))

    _fed(view, write)
    [fact] = [f for f in view.dump() if f["chat_id"] == chat]
    assert (bool(fact["stage_skipped"]), bool(fact["stage_unapproved"]), fact["stage"],
            bool(fact["delegated"]), bool(fact["delegation_active"])) == (
        True, True, "treasury", True, False)
    assert [f["chat_id"] for f in _answers(live, "stage_unapproved")] == [chat]
    assert [f["chat_id"] for f in _answers(live, "delegation_not_in_force")] == [chat]


def _answers(server: Live, query: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=server.url) as http:
        answer = http.post("/v1/reviews/queries/run", json={"query": query},
                           headers={"Authorization": "Bearer key-carol"})
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items
