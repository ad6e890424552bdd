"""The console's stage and delegation markup over plain HTTP (no browser): a staged call's
stages on its page and its inbox row, the delegation page's grant and revoke, and a vote
cast for a delegator from the decide form. tests/ui/test_stages.py drives the same in
Chromium."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from interlock.client import Client
from tests.api.conftest import Live

Api = Callable[[str], Client]
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class Visitor:
    """One signed-in browser, over plain HTTP: its cookies, and the CSRF token of the last
    page it read."""

    def __init__(self, url: str, key: str) -> None:
        self.http = httpx.Client(base_url=url, follow_redirects=False)
        page = self.http.get("/ui/sign-in")
        answer = self.http.post("/ui/sign-in", data={"csrf": self._token(page),
                                                     "api_key": key})
        assert answer.status_code == 303, answer.text
        self.token = ""

    @staticmethod
    def _token(page: httpx.Response) -> str:
        found = _CSRF.search(page.text)
        assert found is not None
        return found[1]

    def get(self, path: str) -> httpx.Response:
        page = self.http.get(path)
        if _CSRF.search(page.text):
            self.token = self._token(page)
        return page

    def post(self, path: str, data: dict[str, str]) -> httpx.Response:
        return self.http.post(path, data={"csrf": self.token, **data})


@pytest.fixture
def visit(live: Live) -> Iterator[Callable[[str], Visitor]]:
    made: list[Visitor] = []

    def open_as(name: str) -> Visitor:
        made.append(Visitor(live.url, f"key-{name}"))
        return made[-1]

    yield open_as
    for v in made:
        v.http.close()


def _wire(api: Api, amount: int) -> tuple[str, str, Any]:
    chat = api("alice").chat("wireAgent")
    [held] = chat.send(f"wire {amount} acme").interrupts
    return chat.id, held.ref, held


def _stages(page: str) -> list[tuple[str, str]]:
    """(name, status) of each stage the page lists, in order."""
    return re.findall(r'data-status="([^"]+)"[^>]*>\s*<strong class="stage-name">([^<]+)<',
                      page)


def _vote(api: Api, who: str, chat_id: str, held: Any, **extra: Any) -> Any:
    body = {"approve": [{"ref": held.ref, "name": held.name,
                         "input_sha256": held.input_sha256}], **extra}
    return api(who).request("POST", f"/v1/chats/{chat_id}/resume", json=body)


def test_a_staged_call_lists_its_stages_and_the_skipped_one(
    visit: Callable[[str], Visitor], api: Api
) -> None:
    chat_id, ref, held = _wire(api, 500)  # under 100,000: the CFO's stage does not apply
    lee = visit("lee")
    inbox = lee.get("/ui/inbox").text
    assert '<span class="stage">stage 1 of 3: team lead</span> · <span class="tally">0 of 1 ' \
           'approval</span>' in inbox
    url = f"/ui/chats/{chat_id}/interrupts/{ref}"
    page = lee.get(url).text
    assert [(n, s) for s, n in _stages(page)] == [
        ("team lead", "waiting"), ("treasury", "to come"), ("CFO", "skipped")]
    assert 'id="policy-stage">stage 1 of 3: team lead<' in page
    assert "skipped: does not apply to this input" in page
    assert "applies when <code>over_100k</code>" in page
    assert 'aria-current="step"' in page
    assert 'name="delegation"' not in page  # lee holds no delegation: no choice offered
    answer = lee.post(f"{url}/approve", {"input_sha256": held.input_sha256})
    assert answer.status_code == 303 and answer.headers["location"].endswith("?recorded=approve")
    page = lee.get(answer.headers["location"]).text
    assert "Your approval is recorded. It waits in stage 2 of 3: treasury (0 of 1 approval " \
           "so far). The tool has not run." in html.unescape(page)
    assert [(n, s) for s, n in _stages(page)] == [
        ("team lead", "approved"), ("treasury", "waiting"), ("CFO", "skipped")]
    assert re.search(r"approved by <strong>lee</strong> at <time", page)
    assert "in stage “team lead”" in page
    assert "Routing: lee may not decide wire" in page  # stage 2 needs the role treasury
    bea = html.unescape(visit("bea").get(url).text)  # lead and treasury: voted in no stage yet
    assert "why-not" not in bea
    # tina's approval of the last applying stage decides it: the page asks to confirm
    tina_page = visit("tina").get(url).text
    assert 'data-confirm="Your approval decides' in tina_page


def test_a_rejection_ends_the_call_at_its_stage_and_later_ones_are_not_reached(
    visit: Callable[[str], Visitor], api: Api
) -> None:
    chat_id, ref, held = _wire(api, 250_000)
    _vote(api, "bea", chat_id, held)  # lead and treasury: she passed the lead's stage
    url = f"/ui/chats/{chat_id}/interrupts/{ref}"
    bea = html.unescape(visit("bea").get(url).text)
    assert 'Segregation: bea voted in stage "team lead" of' in bea
    tina = visit("tina")
    page = tina.get(url).text
    assert 'data-confirm="Your approval decides' not in page  # the CFO's stage comes after
    answer = tina.post(f"{url}/reject", {"input_sha256": held.input_sha256,
                                         "reason": "not this quarter"})
    assert answer.headers["location"].endswith("?done=true")
    page = tina.get(url).text
    assert [(n, s) for s, n in _stages(page)] == [
        ("team lead", "approved"), ("treasury", "rejected"), ("CFO", "not reached")]
    assert "policy-stage" not in page  # decided: it waits nowhere
    assert re.search(r"rejected by <strong>tina</strong> at", page)


def _grant(cora: Visitor, **fields: str) -> httpx.Response:
    cora.get("/ui/delegations")
    until = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    return cora.post("/ui/delegations", {"delegate": "bob", "role.cfo": "on",
                                         "ends_at": until, "tz": "UTC",
                                         "reason": "on leave", **fields})


def test_the_delegation_page_grants_refuses_in_words_and_revokes(
    visit: Callable[[str], Visitor], api: Api
) -> None:
    cora = visit("cora")
    page = cora.get("/ui/delegations").text
    assert 'name="role.cfo" checked' in page and "role admin" not in page
    refused = _grant(cora, delegate="cora")
    assert refused.status_code == 422
    assert "Refused by the server: a delegation names someone else." in refused.text
    assert 'value="cora"' in refused.text  # the form keeps what was typed
    empty = _grant(cora, **{"role.cfo": ""})
    assert empty.status_code == 422 and "lends at least one role or group" in empty.text
    bad = _grant(cora, delegate="bob smith")
    assert bad.status_code == 422 and "delegate: String should match pattern" in bad.text
    late = _grant(cora, ends_at="2020-01-01T00:00")
    assert late.status_code == 422 and "ends after it starts, and after now" in late.text
    no_csrf = cora.http.post("/ui/delegations", data={"delegate": "bob", "role.cfo": "on",
                                                      "ends_at": "2099-01-01T00:00"})
    assert no_csrf.status_code == 403
    assert api("cora").request("GET", "/v1/delegations")["items"] == []  # nothing written
    made = _grant(cora)
    assert made.status_code == 303
    [granted] = api("cora").request("GET", "/v1/delegations")["items"]
    assert made.headers["location"] == f"/ui/delegations?granted={granted['id']}"
    assert (granted["delegate"], granted["roles"], granted["reason"]) == ("bob", ["cfo"],
                                                                         "on leave")
    page = cora.get(made.headers["location"]).text
    assert f"Delegation {granted['id'][:8]} is granted." in page
    mine = page[page.index('id="by-me"'):page.index('id="to-me"')]
    assert f'data-delegation="{granted["id"]}"' in mine and "in force" in mine
    bob_page = visit("bob").get("/ui/delegations").text
    theirs = bob_page[bob_page.index('id="to-me"'):]
    assert f'data-delegation="{granted["id"]}"' in theirs
    assert f"/delegations/{granted['id']}/revoke" not in bob_page  # only its delegator's
    answer = cora.post(f"/ui/delegations/{granted['id']}/revoke", {})
    assert answer.headers["location"] == f"/ui/delegations?revoked={granted['id']}"
    page = cora.get(answer.headers["location"]).text
    assert "revoked by cora at" in page
    [revoked] = api("cora").request("GET", "/v1/delegations")["items"]
    assert revoked["revoked_by"] == "cora"
    bob = visit("bob")
    bob.get("/ui/delegations")
    stranger = bob.post(f"/ui/delegations/{granted['id']}/revoke", {})
    assert stranger.status_code == 403 and "bob did not grant delegation" in stranger.text


def test_a_delegate_votes_for_the_delegator_from_the_decide_form(
    visit: Callable[[str], Visitor], api: Api
) -> None:
    chat_id, ref, held = _wire(api, 250_000)
    _vote(api, "lee", chat_id, held)
    _vote(api, "tina", chat_id, held)
    cora = visit("cora")
    assert _grant(cora).status_code == 303
    [d] = api("cora").request("GET", "/v1/delegations")["items"]
    bob = visit("bob")
    assert f'data-ref="{ref}"' in bob.get("/ui/inbox?show=mine").text  # cora's CFO role, lent
    url = f"/ui/chats/{chat_id}/interrupts/{ref}"
    page = bob.get(url).text
    offered = f'<option value="{d["id"]}" >vote for cora by delegation {d["id"][:8]}</option>'
    assert offered in page
    assert "your own (bob)" not in page  # bob is no CFO: only the delegated vote
    assert "You (bob) may not vote yourself, only by a delegation to you (below)." in page
    assert 'id="approve-delegation"' in page and 'id="reject-delegation"' in page
    bogus = bob.post(f"{url}/approve", {"input_sha256": held.input_sha256,
                                        "delegation": "not-an-id"})
    assert bogus.status_code == 422 and "delegation is not a delegation id" in bogus.text
    unknown = bob.post(f"{url}/approve", {"input_sha256": held.input_sha256,
                                          "delegation": "00000000-0000-4000-8000-000000000000"})
    assert unknown.status_code == 404 and "not found" in unknown.text
    kinds = [e["type"] for e in api("root").open_chat(chat_id).events()]
    assert kinds.count("ApprovalVoted") == 2  # neither refusal wrote a vote
    answer = bob.post(f"{url}/approve", {"input_sha256": held.input_sha256,
                                         "delegation": d["id"]})
    assert answer.headers["location"].endswith("?done=true"), answer.text
    page = html.unescape(bob.get(url).text)
    assert f"approve by bob for cora, by delegation {d['id'][:8]}" in re.sub(r"<[^>]+>", "", page)
    timeline = re.sub(r"<[^>]+>", "", bob.get(f"/ui/chats/{chat_id}").text)
    assert f"Vote: approve by bob for cora, by delegation {d['id'][:8]}" in timeline
    voted = [e for e in api("root").open_chat(chat_id).events() if e["type"] == "ApprovalVoted"]
    assert [(e["actor"], e["data"].get("for_actor"), e["data"].get("delegation_id"))
            for e in voted] == [("lee", None, None), ("tina", None, None),
                                ("bob", "cora", d["id"])]


def test_a_revoked_delegation_is_no_longer_offered_and_refused_if_sent(
    visit: Callable[[str], Visitor], api: Api
) -> None:
    chat_id, ref, held = _wire(api, 250_000)
    _vote(api, "lee", chat_id, held)
    _vote(api, "tina", chat_id, held)
    cora = visit("cora")
    _grant(cora)
    [d] = api("cora").request("GET", "/v1/delegations")["items"]
    bob = visit("bob")
    url = f"/ui/chats/{chat_id}/interrupts/{ref}"
    assert d["id"] in bob.get(url).text  # the page bob has open offers it
    api("cora").request("DELETE", f"/v1/delegations/{d['id']}")  # revoked meanwhile
    late = bob.post(f"{url}/approve", {"input_sha256": held.input_sha256,
                                       "delegation": d["id"]})
    assert late.status_code == 403 and "is not in force now" in late.text
    page = bob.get(url).text
    assert 'name="delegation"' not in page
    assert "You (bob) can read this but not vote." in page
    assert f'data-ref="{ref}"' not in bob.get("/ui/inbox?show=mine").text
    assert [e["type"] for e in api("root").open_chat(chat_id).events()].count(
        "ApprovalVoted") == 2


def test_a_delegate_who_may_vote_too_chooses_whose_vote_and_casts_only_one(
    visit: Callable[[str], Visitor], api: Api
) -> None:
    """tina is a treasurer and holds tom's delegation: the form offers both votes; once
    she has voted for tom she may not vote again for herself (one vote each person)."""
    chat = api("alice").chat("payAgent")
    [held] = chat.send("pay 500 bob").interrupts
    tom = visit("tom")
    tom.get("/ui/delegations")
    until = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    granted = tom.post("/ui/delegations", {"delegate": "tina", "role.treasury": "on",
                                           "ends_at": until, "tz": "UTC"})
    assert granted.status_code == 303
    [d] = api("tom").request("GET", "/v1/delegations")["items"]
    assert (d["roles"], d["groups"]) == (["treasury"], [])  # group finance left unticked
    tina = visit("tina")
    url = f"/ui/chats/{chat.id}/interrupts/{held.ref}"
    page = tina.get(url).text
    assert '<option value="">your own (tina)</option>' in page
    assert f"vote for tom by delegation {d['id'][:8]}" in page
    assert 'id="why-not"' not in page
    answer = tina.post(f"{url}/approve", {"input_sha256": held.input_sha256,
                                          "delegation": d["id"]})
    assert answer.headers["location"].endswith("?recorded=approve")
    page = html.unescape(tina.get(url).text)
    assert "1 of 2 approvals so far" in page
    assert 'name="delegation"' not in page
    assert "You cannot vote: tina already voted (approve)" in page
