"""Approvals through HTTP and the client: each decision kind, routing, quorum, inbox, races."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from interlock.api.auth import AuthConfig
from interlock.client import (
    AlreadyVotedError,
    ApprovalRequiredError,
    ForbiddenError,
    InterlockAPIError,
    InvalidToolInputError,
    StaleInterruptError,
)
from interlock.domain.errors import ConfigurationError
from tests.api.agents import PAID
from tests.api.conftest import ClientFor, Live


def _held(client_for: ClientFor, amount: int = 500) -> tuple[Any, Any]:
    chat = client_for("alice").chat("payAgent")
    turn = chat.send(f"pay {amount} bob-corp")
    assert turn.finish_reason == "interrupted"
    return chat, turn.interrupts[0]


def _paid(chat_id: str) -> list[dict[str, object]]:
    return [p for p in PAID if p["chat"] == chat_id]


def test_two_treasurers_approve_and_the_model_sees_the_payment(
    live: Live, client_for: ClientFor
) -> None:
    chat, held = _held(client_for)
    assert held.approval["terms"]["quorum"] == 2 and held.approval["terms"]["expires_at"]
    tina = client_for("tina").open_chat(chat.id)
    first = tina.decide(held.approve())
    assert first.finish_reason == "interrupted" and _paid(chat.id) == []
    inbox = client_for("tom").interrupts(chat_id=chat.id)["items"]
    assert [v["actor"] for v in inbox[0]["approval"]["votes"]] == ["tina"]
    done = client_for("tom").open_chat(chat.id).decide(held.approve())
    assert done.text == "outcome: {'paid': 500, 'to': 'bob-corp'}"
    assert len(_paid(chat.id)) == 1
    kinds = [d["kind"] for d in client_for("carol").decisions(chat_id=chat.id)["items"]]
    assert kinds == ["approve", "approve"]
    assert client_for("carol").decisions(chat_id=chat.id)["items"][0]["fingerprint"] == \
        next(a for a in client_for("carol").agents() if a["name"] == "payAgent")["fingerprint"]


def test_a_rejection_reaches_the_model_and_the_log(live: Live, client_for: ClientFor) -> None:
    chat, held = _held(client_for)
    done = client_for("tina").open_chat(chat.id).decide(held.reject("unknown payee"))
    assert done.finish_reason == "stop" and _paid(chat.id) == []
    assert "'rejected': True, 'by': 'tina', 'reason': 'unknown payee'" in done.text
    row = client_for("carol").decisions(chat_id=chat.id)["items"][0]
    assert row["kind"] == "reject" and row["output"]["reason"] == "unknown payee"


def test_an_edit_is_validated_then_approved_by_two_others(
    live: Live, client_for: ClientFor
) -> None:
    chat, held = _held(client_for)
    tina = client_for("tina").open_chat(chat.id)
    with pytest.raises(InvalidToolInputError):
        tina.decide(held.edit({"amount": "lots"}, "less"))
    edited = tina.decide(held.edit({"amount": 300, "to": "bob-corp"}, "the invoice says 300"))
    again = edited.interrupts[0]
    assert again.input == {"amount": 300, "to": "bob-corp"}
    with pytest.raises(ForbiddenError):  # tina asked for 300 now
        tina.decide(again.approve())
    client_for("tom").open_chat(chat.id).decide(again.approve())
    done = client_for("root").open_chat(chat.id).decide(again.approve())
    assert done.text == "outcome: {'paid': 300, 'to': 'bob-corp'}"
    rows = client_for("carol").decisions(chat_id=chat.id)["items"]
    edit = next(r for r in rows if r["kind"] == "edit")
    assert edit["original_input"]["amount"] == 500 and edit["replaced_input"]["amount"] == 300


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_an_edit_without_a_reason_is_a_422_that_writes_nothing(
    live: Live, client_for: ClientFor, reason: str | None
) -> None:
    chat, held = _held(client_for)
    version = chat.state()["version"]
    entry = {"ref": held.ref, "name": "pay", "input": {"amount": 300, "to": "bob-corp"},
             **({} if reason is None else {"reason": reason})}
    with pytest.raises(InterlockAPIError) as refused:
        client_for("tina").request("POST", f"/v1/chats/{chat.id}/resume", json={"edit": [entry]})
    assert (refused.value.status, refused.value.code) == (422, "invalid_request")
    assert "reason" in str(refused.value.details)
    assert chat.state()["version"] == version


def test_routing_and_repeat_votes_are_refused_and_write_nothing(
    live: Live, client_for: ClientFor
) -> None:
    chat, held = _held(client_for)
    version = chat.state()["version"]
    with pytest.raises(ForbiddenError) as outsider:
        client_for("bob").open_chat(chat.id).decide(held.approve())
    assert outsider.value.details["reason"] == "not_a_decider"
    with pytest.raises(ApprovalRequiredError):
        client_for("bob").open_chat(chat.id).decide(held.respond({"paid": 500}))
    client_for("tina").open_chat(chat.id).decide(held.approve())
    with pytest.raises(AlreadyVotedError) as repeat:
        client_for("tina").open_chat(chat.id).decide(held.approve())
    assert repeat.value.status == 409 and repeat.value.details["vote"] == "approve"
    assert chat.state()["version"] == version + 1  # only tina's first vote was written


def test_the_inbox_lists_what_the_caller_may_decide(live: Live, client_for: ClientFor) -> None:
    chat, held = _held(client_for)
    assert client_for("bob").interrupts(chat_id=chat.id, decidable=True)["items"] == []
    assert len(client_for("tina").interrupts(chat_id=chat.id, decidable=True)["items"]) == 1
    assert client_for("alice").interrupts(chat_id=chat.id, decidable=True)["items"] == []
    client_for("tina").open_chat(chat.id).decide(held.approve())
    assert client_for("tina").interrupts(chat_id=chat.id, decidable=True)["items"] == []
    assert len(client_for("tom").interrupts(chat_id=chat.id, decidable=True)["items"]) == 1


def test_withdraw_tells_the_model(live: Live, client_for: ClientFor) -> None:
    chat, held = _held(client_for)
    with pytest.raises(ForbiddenError):
        client_for("tina").open_chat(chat.id).withdraw([held.ref], "not mine")
    done = chat.withdraw([held.ref], "wrong payee")
    assert "'withdrawn': True, 'by': 'alice', 'reason': 'wrong payee'" in done.text
    assert client_for("carol").decisions(chat_id=chat.id)["items"][0]["kind"] == "withdraw"


def test_a_withdrawal_naming_a_ref_that_cannot_encode_is_a_422_that_writes_nothing(
    live: Live, client_for: ClientFor
) -> None:
    chat, held = _held(client_for)
    before = len(client_for("alice").open_chat(chat.id).events())
    body = '{"refs": ["' + held.ref + '", "\\ud800"], "reason": "r"}'  # a lone surrogate
    answer = httpx.post(f"{live.url}/v1/chats/{chat.id}/withdraw", content=body,
                        headers={"Authorization": "Bearer key-alice",
                                 "Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert "refs: text holds a lone UTF-16 surrogate" in answer.json()["error"]["message"]
    assert len(client_for("alice").open_chat(chat.id).events()) == before


def test_two_last_votes_of_a_quorum_have_one_outcome(live: Live, client_for: ClientFor) -> None:
    chat, held = _held(client_for)
    client_for("tina").open_chat(chat.id).decide(held.approve())
    outcomes: list[str] = []

    def vote(who: str) -> None:
        try:
            client_for(who).open_chat(chat.id).decide(held.approve())
            outcomes.append("ok")
        except InterlockAPIError as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=vote, args=(w,)) for w in ("tom", "root")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 1 and len(_paid(chat.id)) == 1
    lost = {"interrupt_not_pending", "concurrent_modification", "turn_in_progress"}
    assert set(outcomes) - {"ok"} <= lost


def test_a_withdrawal_against_an_approval_has_one_outcome(
    live: Live, client_for: ClientFor
) -> None:
    chat, held = _held(client_for)
    client_for("tina").open_chat(chat.id).decide(held.approve())
    outcomes: list[str] = []

    def act(kind: str) -> None:
        try:
            if kind == "approve":
                client_for("tom").open_chat(chat.id).decide(held.approve())
            else:
                client_for("alice").open_chat(chat.id).withdraw([held.ref], "changed my mind")
            outcomes.append(kind)
        except InterlockAPIError as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=act, args=(k,)) for k in ("approve", "withdraw")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [o for o in outcomes if o in ("approve", "withdraw")]
    assert len(won) == 1 and len(_paid(chat.id)) == (1 if won == ["approve"] else 0)


def test_keys_naming_one_person_twice_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        AuthConfig.from_mapping({"k1": {"id": "dave"}, "k2": {"id": "Dave"}})
    with pytest.raises(ConfigurationError):
        AuthConfig.from_mapping({"k1": {"id": "dave "}})


def test_a_treasury_only_key_passes_the_resume_route_gate(live: Live) -> None:
    # tina has only `treasury`: the route lets her in (404 here), the policy routes her votes
    r = httpx.post(f"{live.url}/v1/chats/00000000-0000-0000-0000-000000000000/resume",
                   headers={"Authorization": "Bearer key-tina"}, json={})
    assert r.status_code == 404


def test_the_treasury_banking_example_needs_two_treasurers(
    live: Live, client_for: ClientFor
) -> None:
    chat = client_for("alice").chat("treasuryBankingAgent")
    ask = chat.send("transfer $2500 to savings").interrupts[0]
    held = client_for("bob").open_chat(chat.id).decide(ask.respond({"approved": True}))
    transfer = held.interrupts[0]
    assert transfer.name == "transferMoney" and transfer.approval["terms"]["quorum"] == 2
    client_for("tina").open_chat(chat.id).decide(transfer.approve())
    done = client_for("tom").open_chat(chat.id).decide(transfer.approve())
    assert done.text.startswith("Done. Your checking balance is now")
    small = client_for("alice").chat("treasuryBankingAgent")
    ask = small.send("transfer $20 to savings").interrupts[0]
    done = client_for("bob").open_chat(small.id).decide(ask.respond({"approved": True}))
    assert done.text.startswith("Done.")  # under the limit: no approval asked


def test_approvals_naming_no_input_never_run_an_input_someone_else_edited_in(
    live: Live, client_for: ClientFor
) -> None:
    """D29: tina and tom saw 5,000 to bob-corp; root edits it to 9,999 to mallory. Their
    approvals without `input_sha256` (raw HTTP, a console form that lost its field, a retry)
    are refused with 409 and write nothing; approvals naming the edited input count."""
    chat, held = _held(client_for, 5000)
    edited = client_for("root").open_chat(chat.id).decide(
        held.edit({"amount": 9999, "to": "mallory"}, "new payee")).interrupts[0]
    version = chat.state()["version"]
    bare = {"approve": [{"ref": held.ref, "name": held.name}]}
    for who, key in (("tina", None), ("tom", None), ("tina", "retry-1"), ("tina", "retry-1")):
        headers = {"Authorization": f"Bearer key-{who}"}
        if key:
            headers["Idempotency-Key"] = key
        answer = httpx.post(f"{live.url}/v1/chats/{chat.id}/resume", json=bare, headers=headers)
        assert answer.status_code == 409, answer.text
        error = answer.json()["error"]
        assert error["code"] == "stale_interrupt" and error["details"]["changed_by"] == "root"
        assert error["details"]["input_sha256"] == edited.input_sha256
    with pytest.raises(StaleInterruptError):  # the interrupt tina read names 5,000
        client_for("tina").open_chat(chat.id).decide(held.approve())
    assert chat.state()["version"] == version and _paid(chat.id) == []
    client_for("tina").open_chat(chat.id).decide(edited.approve())
    done = client_for("tom").open_chat(chat.id).decide(edited.approve())
    assert done.text == "outcome: {'paid': 9999, 'to': 'mallory'}"


# -- staged approvals (wireAgent: the team lead, then treasury, then over 100,000 the CFO)

def _wire(client_for: ClientFor, amount: int) -> tuple[Any, Any]:
    chat = client_for("alice").chat("wireAgent")
    turn = chat.send(f"wire {amount} bob-corp")
    assert turn.finish_reason == "interrupted"
    return chat, turn.interrupts[0]


def _stage(client_for: ClientFor, chat_id: str) -> dict[str, Any]:
    [call] = client_for("carol").open_chat(chat_id).state()["interrupts"]
    [row] = client_for("root").interrupts(chat_id=chat_id)["items"]
    assert row["stage"] == call["stage"]  # the inbox and the chat show the same stage
    stage: dict[str, Any] = call["stage"]
    return stage


def test_a_staged_call_passes_each_stage_over_http(live: Live, client_for: ClientFor) -> None:
    chat, held = _wire(client_for, 150_000)
    first = _stage(client_for, chat.id)
    assert (first["index"], first["name"], first["of"], first["roles"]) == (
        0, "team lead", 3, ["lead"])
    with pytest.raises(ForbiddenError) as early:  # the CFO's turn comes last
        client_for("cora").open_chat(chat.id).decide(held.approve())
    assert early.value.details["roles"] == ["lead"]
    assert client_for("cora").interrupts(chat_id=chat.id, decidable=True)["items"] == []
    assert len(client_for("lee").interrupts(chat_id=chat.id, decidable=True)["items"]) == 1
    client_for("lee").open_chat(chat.id).decide(held.approve())
    second = _stage(client_for, chat.id)
    assert second["name"] == "treasury" and second["votes"] == []
    assert len(client_for("tina").interrupts(chat_id=chat.id, decidable=True)["items"]) == 1
    client_for("tina").open_chat(chat.id).decide(held.approve())
    assert _stage(client_for, chat.id)["name"] == "CFO" and _paid(chat.id) == []
    done = client_for("cora").open_chat(chat.id).decide(held.approve())
    assert done.text == "outcome: {'paid': 150000, 'to': 'bob-corp'}"
    assert [d["actor"] for d in client_for("carol").decisions(chat_id=chat.id)["items"]] == [
        "cora", "tina", "lee"]  # newest first


def test_a_staged_call_under_the_threshold_skips_the_cfo(
    live: Live, client_for: ClientFor
) -> None:
    chat, held = _wire(client_for, 5000)
    assert _stage(client_for, chat.id)["skipped"] == ["CFO"]
    client_for("lee").open_chat(chat.id).decide(held.approve())
    done = client_for("tina").open_chat(chat.id).decide(held.approve())
    assert done.text == "outcome: {'paid': 5000, 'to': 'bob-corp'}"


def test_an_edit_at_stage_two_sends_the_call_back_to_stage_one(
    live: Live, client_for: ClientFor
) -> None:
    chat, held = _wire(client_for, 5000)
    client_for("lee").open_chat(chat.id).decide(held.approve())
    edited = client_for("tina").open_chat(chat.id).decide(
        held.edit({"amount": 200_000, "to": "bob-corp"}, "the full invoice"))
    again = edited.interrupts[0]
    stage = _stage(client_for, chat.id)
    assert (stage["name"], stage["votes"], stage["skipped"]) == ("team lead", [], [])
    client_for("lee").open_chat(chat.id).decide(again.approve())  # lee again, on the new input
    client_for("tom").open_chat(chat.id).decide(again.approve())
    assert _stage(client_for, chat.id)["name"] == "CFO" and _paid(chat.id) == []


def test_nobody_approves_two_stages_and_conflicting_roles_are_refused(
    live: Live, client_for: ClientFor
) -> None:
    chat, held = _wire(client_for, 5000)
    client_for("bea").open_chat(chat.id).decide(held.approve())
    version = chat.state()["version"]
    with pytest.raises(ForbiddenError) as twice:
        client_for("bea").open_chat(chat.id).decide(held.approve())
    assert twice.value.status == 403 and twice.value.details["reason"] == "other_stage"
    assert client_for("bea").interrupts(chat_id=chat.id, decidable=True)["items"] == []
    with pytest.raises(ForbiddenError) as toxic:
        client_for("tex").open_chat(chat.id).decide(held.approve())
    assert toxic.value.details["reason"] == "conflicting_roles"
    assert toxic.value.details["roles"] == ["trader", "treasury"]
    assert chat.state()["version"] == version and _paid(chat.id) == []


def test_two_stages_votes_at_once_have_one_outcome(live: Live, client_for: ClientFor) -> None:
    """The lead and a treasurer vote at the same moment: the treasurer's vote may only land
    after the lead's, never alongside it in stage one, and the stage advances once."""
    chat, held = _wire(client_for, 5000)
    outcomes: dict[str, str] = {}

    def vote(who: str) -> None:
        try:
            client_for(who).open_chat(chat.id).decide(held.approve())
            outcomes[who] = "ok"
        except InterlockAPIError as exc:
            outcomes[who] = exc.code

    threads = [threading.Thread(target=vote, args=(w,)) for w in ("lee", "tina")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes["lee"] in ("ok", "concurrent_modification")
    assert outcomes["tina"] in ("ok", "forbidden", "concurrent_modification")
    votes = [e for e in client_for("root").open_chat(chat.id).events()
             if e["type"] == "ApprovalVoted"]
    assert [(v["actor"], v["data"]["stage"]) for v in votes] == [
        (w, i) for i, w in enumerate(w for w in ("lee", "tina") if outcomes[w] == "ok")]
    assert len(_paid(chat.id)) == (1 if outcomes == {"lee": "ok", "tina": "ok"} else 0)


# -- delegation (POST/GET/DELETE /v1/delegations; a resume's `delegation`)

def _away(client_for: ClientFor, delegator: str, delegate: str, **scope: Any
          ) -> dict[str, Any]:
    """`delegator` delegates to `delegate` from an hour ago for a week."""
    now = datetime.now(UTC)
    body = {"delegate": delegate, "starts_at": (now - timedelta(hours=1)).isoformat(),
            "ends_at": (now + timedelta(days=7)).isoformat(), "reason": "on leave", **scope}
    made: dict[str, Any] = client_for(delegator).request("POST", "/v1/delegations", json=body)
    return made


def _vote_by(client_for: ClientFor, who: str, chat_id: str, held: Any,
             delegation: str) -> Any:
    body = {"approve": [{"ref": held.ref, "name": held.name,
                         "input_sha256": held.input_sha256}], "delegation": delegation}
    return client_for(who).request("POST", f"/v1/chats/{chat_id}/resume", json=body)


def test_a_delegate_votes_for_the_delegator_until_it_is_revoked(
    live: Live, client_for: ClientFor
) -> None:
    made = _away(client_for, "tina", "dana", roles=["treasury"])
    assert (made["delegator"], made["delegate"], made["roles"]) == ("tina", "dana",
                                                                      ["treasury"])
    with pytest.raises(ForbiddenError) as wider:  # dana may not lend treasury: not hers
        _away(client_for, "dana", "bob", roles=["treasury"])
    assert wider.value.details["reason"] == "wider_than_own"
    assert [d["id"] for d in client_for("dana").request("GET", "/v1/delegations")["items"]] \
        == [made["id"]]
    assert client_for("bob").request("GET", "/v1/delegations")["items"] == []
    chat, held = _held(client_for)
    with pytest.raises(ForbiddenError):  # dana alone is no treasurer
        client_for("dana").open_chat(chat.id).decide(held.approve())
    _vote_by(client_for, "dana", chat.id, held, made["id"])
    [voted] = [e for e in client_for("root").open_chat(chat.id).events()
               if e["type"] == "ApprovalVoted"]
    assert (voted["actor"], voted["data"]["for_actor"], voted["data"]["delegation_id"]) == (
        "dana", "tina", made["id"])
    with pytest.raises(AlreadyVotedError):  # it was tina's vote
        client_for("tina").open_chat(chat.id).decide(held.approve())
    with pytest.raises(InterlockAPIError) as stranger:  # not bob's delegation
        _vote_by(client_for, "bob", chat.id, held, made["id"])
    assert stranger.value.details["reason"] == "not_the_delegate"
    revoked = client_for("tina").request("DELETE", f"/v1/delegations/{made['id']}")
    assert revoked["revoked_by"] == "tina"
    again, held2 = _held(client_for)
    with pytest.raises(ForbiddenError) as late:
        _vote_by(client_for, "dana", again.id, held2, made["id"])
    assert late.value.details["reason"] == "delegation_inactive"
    with pytest.raises(InterlockAPIError) as unknown:
        client_for("eve").request("DELETE", f"/v1/delegations/{made['id']}")  # globex
    assert (unknown.value.status, unknown.value.code) == (404, "delegation_not_found")


def test_a_delegation_never_lets_its_delegate_approve_their_own_request(
    live: Live, client_for: ClientFor
) -> None:
    made = _away(client_for, "tina", "dana", roles=["treasury"])
    chat = client_for("dana").chat("payAgent")
    held = chat.send("pay 500 bob-corp").interrupts[0]  # dana asks, then votes for tina
    with pytest.raises(ForbiddenError) as own:
        _vote_by(client_for, "dana", chat.id, held, made["id"])
    assert own.value.details["reason"] == "requester"
    assert _paid(chat.id) == []
