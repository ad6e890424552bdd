"""Data policies through HTTP (/v1/policies): proposed by one, approved by another, in force
from its time for later calls only, its authors barred from the calls it holds, what-if."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.client import ForbiddenError, InterlockAPIError
from tests.api.agents import PAID
from tests.api.conftest import ClientFor, Live
from tests.api.test_decision_log_stages import _console

LEADS = {"roles": ["lead"], "when": {"path": "amount", "op": ">", "value": 1000}}


def _propose(client_for: ClientFor, who: str, document: dict[str, Any],
             pid: str = "pay-limits", **more: Any) -> dict[str, Any]:
    body = {"id": pid, "agent": "payAgent", "tool": "pay", "document": document,
            "reason": "the risk committee's new limits", **more}
    made: dict[str, Any] = client_for(who).request("POST", "/v1/policies", json=body)
    return made


def _approve(client_for: ClientFor, who: str, version: int,
             pid: str = "pay-limits") -> dict[str, Any]:
    done: dict[str, Any] = client_for(who).request(
        "POST", f"/v1/policies/{pid}/versions/{version}/approve", json={"reason": "reviewed"})
    return done


def _refused(call: Any) -> InterlockAPIError:
    with pytest.raises(InterlockAPIError) as refused:
        call()
    return refused.value


def _pay(client_for: ClientFor, amount: int) -> tuple[Any, Any]:
    chat = client_for("alice").chat("payAgent")
    return chat, chat.send(f"pay {amount} bob-corp")


def test_a_version_proposed_by_one_and_approved_by_another_judges_later_calls(
    live: Live, client_for: ClientFor
) -> None:
    v1 = _propose(client_for, "pia", LEADS)
    assert (v1["version"], v1["state"], v1["proposed_by"]) == (1, "proposed", "pia")
    no_role = _refused(lambda: _propose(client_for, "alice", LEADS))
    assert (no_role.status, no_role.details["reason"]) == (403, "not_a_policy_admin")
    own = _refused(lambda: _approve(client_for, "pia", 1))
    assert (own.status, own.code) == (403, "four_eyes")
    bad = _refused(lambda: _propose(client_for, "pia", {"when": {"path": "amount", "op": "=>",
                                                                 "value": 1}}))
    assert (bad.status, bad.code, bad.details["where"]) == (422, "invalid_policy", "when.op")
    tool = _refused(lambda: client_for("pia").request("POST", "/v1/policies", json={
        "id": "x", "agent": "payAgent", "tool": "refund", "document": {}, "reason": "r"}))
    assert (tool.code, tool.details["where"]) == ("invalid_policy", "tool")
    # proposed only: the code's policy holds a payment of 500 (two treasurers)
    _, code_held = _pay(client_for, 500)
    assert code_held.interrupts[0].approval["terms"].get("policy") is None
    approved = _approve(client_for, "ray", 1)
    assert (approved["state"], approved["approved_by"]) == ("approved", "ray")
    again = _refused(lambda: _approve(client_for, "root", 1))
    assert (again.status, again.code) == (409, "policy_state")
    # in force: 500 runs, 5000 waits for a lead, recording the version
    small_chat, small = _pay(client_for, 500)
    assert small.finish_reason == "stop"
    assert len([p for p in PAID if p["chat"] == small_chat.id]) == 1
    chat, turn = _pay(client_for, 5000)
    held = turn.interrupts[0]
    assert held.approval["terms"]["policy"] == {"id": "pay-limits", "version": 1,
                                                "proposed_by": "pia", "approved_by": "ray"}
    assert held.approval["terms"]["roles"] == ["lead"]
    # v2 (a CFO decides) comes into force while the call waits: the call keeps v1
    assert _propose(client_for, "ray", {"roles": ["cfo"]})["version"] == 2
    _approve(client_for, "pia", 2)
    with pytest.raises(ForbiddenError):
        client_for("cora").open_chat(chat.id).decide(held.approve())
    done = client_for("lee").open_chat(chat.id).decide(held.approve())
    assert done.text == "outcome: {'paid': 5000, 'to': 'bob-corp'}"
    [logged] = client_for("carol").decisions(chat_id=chat.id)["items"]
    assert (logged["actor"], logged["policy"]) == ("lee", "pay-limits@1")  # the log names it
    later_chat, later = _pay(client_for, 500)
    assert later.interrupts[0].approval["terms"]["policy"]["version"] == 2
    client_for("cora").open_chat(later_chat.id).decide(later.interrupts[0].approve())
    listed = client_for("carol").request("GET", "/v1/policies/pay-limits")["items"]
    assert [(v["version"], v["state"]) for v in listed] == [(1, "approved"), (2, "approved")]
    assert client_for("eve").request("GET", "/v1/policies")["items"] == []  # globex
    gone = _refused(lambda: client_for("eve").request("GET",
                                                      "/v1/policies/pay-limits/versions/1"))
    assert (gone.status, gone.code) == (404, "policy_not_found")
    withdrawn = client_for("pia").request("POST", "/v1/policies/pay-limits/versions/2/withdraw",
                                          json={"reason": "the CFO is away"})
    assert withdrawn["state"] == "withdrawn"
    review = client_for("carol").request("POST", "/v1/reviews/queries/run",
                                         json={"query": "policy_withdrawn"})
    assert [(r["actor"], r["policy"]) for r in review["items"]] == [("cora", "pay-limits@2")]
    _, back = _pay(client_for, 5000)  # v1 is in force again
    assert back.interrupts[0].approval["terms"]["policy"]["version"] == 1


def test_who_proposed_or_approved_a_calls_policy_may_not_decide_it(
    live: Live, client_for: ClientFor
) -> None:
    _propose(client_for, "pia", {"roles": ["treasury", "policy_admin"]})
    _approve(client_for, "ray", 1)
    chat, turn = _pay(client_for, 500)
    held = turn.interrupts[0]
    # the inbox does not offer it to its policy's authors, as it does to another treasurer
    assert client_for("ray").interrupts(chat_id=chat.id, decidable=True)["items"] == []
    assert len(client_for("tina").interrupts(chat_id=chat.id, decidable=True)["items"]) == 1
    for author, role in (("ray", "approved"), ("pia", "proposed")):
        refused = _refused(lambda a=author: client_for(a).open_chat(chat.id).decide(
            held.approve()))
        assert (refused.status, refused.code, refused.details["role"]) == (
            403, "policy_author", role)
    now = client_for("tina").request("GET", "/v1/policies")["items"][0]["approved_at"]
    made = client_for("tina").request("POST", "/v1/delegations", json={
        "delegate": "ray", "starts_at": now, "ends_at": "2999-01-01T00:00:00Z",
        "roles": ["treasury"]})
    by_delegation = _refused(lambda: client_for("ray").request(
        "POST", f"/v1/chats/{chat.id}/resume", json={
            "approve": [{"ref": held.ref, "name": held.name,
                         "input_sha256": held.input_sha256}], "delegation": made["id"]}))
    assert (by_delegation.code, by_delegation.details["person"]) == ("policy_author", "ray")
    done = client_for("tina").open_chat(chat.id).decide(held.approve())
    assert done.text == "outcome: {'paid': 500, 'to': 'bob-corp'}"
    live.views.catch_up()  # the console's decision log names the version it was held under
    page = _console(live, f"/ui/decisions?chat_id={chat.id}")
    assert '<small class="policy">policy <code' in page and ">pay-limits@1</code>" in page


def test_what_if_runs_a_proposed_version_against_the_recorded_calls(
    live: Live, client_for: ClientFor
) -> None:
    approved_chat, turn = _pay(client_for, 500)  # held by the code: two treasurers approve
    client_for("tina").open_chat(approved_chat.id).decide(turn.interrupts[0].approve())
    client_for("tom").open_chat(approved_chat.id).decide(turn.interrupts[0].approve())
    ran_chat, _ = _pay(client_for, 50)  # runs: the code holds over 100 only
    waiting_chat, waiting = _pay(client_for, 5000)
    client_for("tina").open_chat(waiting_chat.id).decide(waiting.interrupts[0].approve())
    one = _propose(client_for, "pia", {"roles": ["treasury"],
                                       "when": {"path": "amount", "op": ">", "value": 10}})
    result = client_for("pia").request(
        "POST", f"/v1/policies/pay-limits/versions/{one['version']}/what-if")
    calls = {c["chat_id"]: c for c in result["calls"]}
    assert {k: (c["recorded"], c["was_held"], c["held"], c["verdict"])
            for k, c in calls.items()} == {
        approved_chat.id: ("completed", True, True, "passes"),  # tina's yes is enough now
        ran_chat.id: ("completed", False, True, "fails"),  # held now, and nobody approved it
        waiting_chat.id: ("interrupted", True, True, "passes")}
    counts = result["counts"]
    assert (counts["calls"], counts["held"], counts["newly_held"]) == (3, 3, 1)
    assert (counts["passes"], counts["fails"], counts["runs"]) == (2, 1, 0)
    staged = _propose(client_for, "pia", {"stages": [
        {"name": "lead", "roles": ["lead"]}, {"name": "treasury", "roles": ["treasury"]},
        {"name": "cfo", "roles": ["cfo"],
         "when": {"path": "amount", "op": ">", "value": 1000}}]})
    result = client_for("carol").request(
        "POST", f"/v1/policies/pay-limits/versions/{staged['version']}/what-if")
    calls = {c["chat_id"]: c for c in result["calls"]}
    assert (calls[approved_chat.id]["stages"], calls[approved_chat.id]["verdict"]) == (
        ["lead", "treasury"], "fails")  # no lead approved it
    assert calls[approved_chat.id]["why"] == "lead: 0 of 1 approvals by those who may decide it"
    assert (calls[waiting_chat.id]["stages"], calls[waiting_chat.id]["verdict"]) == (
        ["lead", "treasury", "cfo"], "waits")
    missing = _refused(lambda: client_for("pia").request(
        "POST", "/v1/policies/nope/versions/1/what-if"))
    assert missing.code == "policy_not_found"


def test_an_edit_is_judged_by_the_stages_of_the_version_the_call_was_held_under(
    live: Live, client_for: ClientFor
) -> None:
    _propose(client_for, "pia", {"stages": [
        {"name": "treasury", "roles": ["treasury"]},
        {"name": "cfo", "roles": ["cfo"], "when": {"path": "amount", "op": ">", "value": 1000}}]})
    _approve(client_for, "ray", 1)
    chat, turn = _pay(client_for, 5000)
    held = turn.interrupts[0]
    assert held.approval["terms"]["stages_apply"] == [True, True]
    _propose(client_for, "pia", {"roles": ["lead"]})  # v2, another shape: in force too
    _approve(client_for, "ray", 2)
    client_for("tina").open_chat(chat.id).decide(
        held.edit({"amount": 500, "to": "bob-corp"}, "the invoice says 500"))
    [edit] = [e for e in client_for("root").open_chat(chat.id).events()
              if e["type"] == "ApprovalVoted"]
    assert edit["data"]["stages_apply"] == [True, False]  # v1's cfo `when`, not all stages
