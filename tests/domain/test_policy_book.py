"""Policies as data, pure: a tenant's PolicyBook (proposed, approved under four eyes,
withdrawn, in force from a time), the condition language, the hold under the version in
force, and the rule that nobody decides a call whose policy they changed. No store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from interlock.domain import ApproveEntry, Chat, Decider, Message, Part, ToolRequest
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.policies import Approval, ApprovalTerms, PolicyRef
from interlock.domain.chat.rules import barred_voters
from interlock.domain.delegations import DelegationRequest, Delegations
from interlock.domain.errors import (
    ForbiddenError,
    FourEyesError,
    InvalidPolicyError,
    PolicyAuthorError,
    PolicyNotFoundError,
    PolicyStateError,
)
from interlock.domain.policy_book import (
    Condition,
    ConditionError,
    PolicyApproved,
    PolicyBook,
    PolicyDocument,
    PolicyProposal,
    PolicyProposed,
    PolicyWithdrawn,
    check_condition,
    replay,
)
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.gating import hold_for_approval
from tests.domain.test_approval_stages import LARGE, SMALL, TOOLS, Pay, pay

NOW = datetime.now(UTC)
PIA = Decider("pia", frozenset({"policy_admin"}))
RAY = Decider("ray", frozenset({"policy_admin", "treasury"}))
TINA = Decider("tina", frozenset({"treasury"}))
TOM = Decider("tom", frozenset({"treasury"}))
OVER_100K = {"path": "amount", "op": ">", "value": 100_000}
STAGED = {
    "stages": [
        {"name": "treasury", "roles": ["treasury"]},
        {"name": "cfo", "roles": ["cfo"], "when": OVER_100K, "expires_in": 3600},
    ],
}


def at() -> datetime:
    """Now: a version is in force from its approval's timestamp, which is after NOW."""
    return datetime.now(UTC)


def proposal(document: dict[str, Any] | None = None, *, pid: str = "pay-limits",
             effective_from: datetime | None = None, tool: str = "pay") -> PolicyProposal:
    return PolicyProposal(id=pid, agent="bank", tool=tool, reason="new limits",
                          document=PolicyDocument.model_validate(document or STAGED),
                          effective_from=effective_from)


def approved(book: PolicyBook, document: dict[str, Any] | None = None,
             effective_from: datetime | None = None) -> int:
    v = book.propose(PIA, proposal(document, effective_from=effective_from), NOW)
    return book.approve(v.id, v.version, RAY).version


def test_a_version_is_proposed_by_one_approved_by_another_and_replayed_as_recorded() -> None:
    book = PolicyBook("acme")
    v1 = book.propose(PIA, proposal(), NOW)
    assert (v1.id, v1.version, v1.state, v1.proposed_by) == ("pay-limits", 1, "proposed", "pia")
    with pytest.raises(FourEyesError) as own:
        book.approve("pay-limits", 1, Decider("PIA ", frozenset({"policy_admin"})))
    assert (own.value.code, own.value.status) == ("four_eyes", 403)
    with pytest.raises(ForbiddenError) as tina:  # no policy role
        book.approve("pay-limits", 1, TINA)
    assert tina.value.details["reason"] == "not_a_policy_admin"
    with pytest.raises(ForbiddenError):
        book.propose(TINA, proposal(), NOW)
    done = book.approve("pay-limits", 1, RAY, "reviewed")
    assert (done.state, done.approved_by) == ("approved", "ray")
    with pytest.raises(PolicyStateError):
        book.approve("pay-limits", 1, Decider("root", frozenset({"admin"})))
    v2 = book.propose(RAY, proposal({"roles": ["cfo"]}), NOW)
    assert v2.version == 2
    gone = book.withdraw("pay-limits", 2, RAY, "not needed")
    assert gone.state == "withdrawn"
    with pytest.raises(PolicyStateError):
        book.approve("pay-limits", 2, PIA)
    with pytest.raises(PolicyNotFoundError):
        book.get("pay-limits", 3)
    events = book.seal(lambda prev, e: "sealed")
    assert [type(e) for e in events] == [PolicyProposed, PolicyApproved, PolicyProposed,
                                         PolicyWithdrawn]
    assert replay("acme", events).versions == book.versions
    assert replay("globex", events).versions == {}


def test_one_policy_governs_a_tool_and_a_document_is_refused_naming_its_bad_part() -> None:
    book = PolicyBook("acme")
    book.propose(PIA, proposal(), NOW)
    with pytest.raises(InvalidPolicyError) as other_id:
        book.propose(PIA, proposal(pid="another"), NOW)
    assert other_id.value.details["where"] == "id"
    with pytest.raises(InvalidPolicyError) as tool:
        book.propose(PIA, proposal(tool="wire"), NOW, tools={"bank": ["pay"]})
    assert tool.value.details["where"] == "tool"
    bad_op = {"when": {"all": [{"path": "amount", "op": "~", "value": 1}]}}
    with pytest.raises(InvalidPolicyError) as op:
        proposal(bad_op).document.compile()
    assert op.value.details["where"] == "when.all[0].op"
    stage = {"stages": [{"name": "a", "when": {"path": "amount", "op": "in", "value": 3}}]}
    with pytest.raises(InvalidPolicyError) as where:
        proposal(stage).document.compile()
    assert where.value.details["where"] == "stages[0].when.value"
    with pytest.raises(InvalidPolicyError) as mixed:
        proposal({"roles": ["x"], "stages": STAGED["stages"]}).document.compile()
    assert mixed.value.details["where"] == "document" and "with stages" in mixed.value.message
    with pytest.raises(InvalidPolicyError) as escalate:
        proposal({"escalate_after": 60}).document.compile()
    assert "escalate_to" in escalate.value.message
    with pytest.raises(ValidationError):
        proposal({"quorum": 0})
    with pytest.raises(ValidationError):
        proposal({"approvers": ["x"]})  # no such field
    deep: dict[str, Any] = OVER_100K
    for _ in range(10):
        deep = {"not": deep}
    with pytest.raises(InvalidPolicyError) as nested:
        check_condition(deep)
    assert "nests" in nested.value.message


def test_the_condition_language_compares_paths_of_the_validated_input() -> None:
    big, small = Pay(**LARGE), Pay(**SMALL)
    assert Condition(OVER_100K)(big) and not Condition(OVER_100K)(small)
    assert Condition({"any": [{"path": "to", "op": "in", "value": ["x", "acme"]},
                              OVER_100K]})(small)
    assert Condition({"not": {"path": "to", "op": "==", "value": "acme"}})(small) is False
    assert Condition({"path": "memo", "op": "exists"})(small) is False  # missing: false
    assert Condition({"path": "nope.deeper", "op": ">", "value": 1})(small) is False
    assert Condition({"path": "amount", "op": "==", "value": True})(small) is False
    with pytest.raises(ConditionError):  # a text against a number: the callers fail closed
        Condition({"path": "to", "op": ">", "value": 5})(small)
    compiled = proposal().document.compile()
    assert compiled.stages_apply(small) == [True, False]
    assert compiled.stages_apply(big) == [True, True]
    assert compiled.describe()["stages"][1]["when"] == (
        'when {"op":">","path":"amount","value":100000}')
    failing = PolicyDocument.model_validate(
        {"when": {"path": "to", "op": ">", "value": 5}}).compile()
    chat, agent = requested(SMALL), Agent("bank", "pays", [pay], "test:model")
    in_force = {"pay": (failing, PolicyRef(id="p", version=1, proposed_by="pia",
                                            approved_by="ray"))}
    assert hold_for_approval(chat, agent, chat.runnable_calls(), NOW, in_force) == []


def test_the_version_in_force_is_the_latest_approved_effective_and_not_withdrawn() -> None:
    book = PolicyBook("acme")
    assert book.in_force("bank", at()) == {}
    approved(book)
    assert book.in_force("bank", NOW) == {}  # before its approval
    assert book.in_force("bank", at())["pay"].ref.version == 1
    later = NOW + timedelta(days=1)
    approved(book, {"roles": ["cfo"]}, effective_from=later)
    assert book.in_force("bank", at())["pay"].ref.version == 1  # v2 is not in force yet
    assert book.in_force("bank", later)["pay"].ref == PolicyRef(
        id="pay-limits", version=2, proposed_by="pia", approved_by="ray")
    book.propose(PIA, proposal({"roles": ["lead"]}), NOW)  # v3 proposed only
    assert book.in_force("bank", later)["pay"].ref.version == 2
    book.withdraw("pay-limits", 2, PIA, "too strict")
    assert book.in_force("bank", later + timedelta(seconds=1))["pay"].ref.version == 1
    assert book.in_force("other", later) == {}


def requested(payment: dict[str, Any], requester: str = "alice") -> Chat:
    chat = Chat.start("bank", actor=requester, tenant="acme")
    chat.send_message("pay acme", actor=requester)
    request = ToolRequest(ref="p1", name="pay", input=payment)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    return chat


def held_under(book: PolicyBook, payment: dict[str, Any] = LARGE) -> Chat:
    """A call of `bank.pay` held as the turn loop holds it: by the data policy in force."""
    agent = Agent("bank", "pays", [pay], "test:model",
                  approvals={"pay": Approval(roles=["approver"])})
    chat = requested(payment)
    when = at()
    hold_for_approval(chat, agent, chat.runnable_calls(), when, book.in_force("bank", when))
    chat.finish_turn("interrupted")
    chat.collect_events()
    return chat


def vote(chat: Chat, decider: Decider, payment: dict[str, Any] = LARGE) -> list[Any]:
    entry = ApproveEntry(ref="p1", name="pay", input_sha256=sha256_hex(payment))
    chat.resume([], [], actor=decider.id, tools=TOOLS, votes=[entry], decider=decider, now=NOW)
    return chat.collect_events()


def test_a_data_policy_in_force_wins_over_the_code_and_the_call_records_its_version() -> None:
    book = PolicyBook("acme")
    code = held_under(book).state.calls["p1"].approval
    assert code is not None and code.terms.roles == ["approver"] and code.terms.policy is None
    approved(book)
    state = held_under(book).state.calls["p1"].approval
    assert state is not None and state.terms.policy == PolicyRef(
        id="pay-limits", version=1, proposed_by="pia", approved_by="ray")
    assert state.terms.stages_apply == [True, True] and state.terms.roles == ["treasury"]
    # a call its data policy's `when` does not hold runs, whatever the code says
    approved(book, {"roles": ["cfo"], "when": OVER_100K})
    assert held_under(book, SMALL).state.calls["p1"].status == "requested"
    # terms without a policy serialise as they did before the field existed
    plain = ApprovalTerms(roles=["treasury"])
    assert "policy" not in plain.model_dump(mode="json")


def test_a_later_version_taking_effect_does_not_change_a_waiting_call() -> None:
    book = PolicyBook("acme")
    approved(book, {"roles": ["treasury"], "quorum": 2})
    chat = held_under(book)
    approved(book, {"roles": ["cfo"]})  # v2 in force from now: cfo alone
    assert book.in_force("bank", at())["pay"].ref.version == 2
    [first] = vote(chat, TINA)
    assert first.outcome == "pending"  # still v1's quorum of two treasurers
    with pytest.raises(ForbiddenError):  # a cfo is nobody under v1
        vote(chat, Decider("cora", frozenset({"cfo"})))
    [done] = vote(chat, TOM)
    assert done.outcome == "approved"
    approval = chat.state.calls["p1"].approval
    assert approval is not None and approval.terms.policy is not None
    assert approval.terms.policy.version == 1


def test_nobody_decides_a_call_whose_policy_they_proposed_or_approved() -> None:
    book = PolicyBook("acme")
    approved(book, {"roles": ["treasury", "policy_admin"], "quorum": 2})
    chat = held_under(book)
    for author, role in ((RAY, "approved"), (PIA, "proposed")):
        with pytest.raises(PolicyAuthorError) as refused:
            vote(chat, author)
        assert (refused.value.code, refused.value.status) == ("policy_author", 403)
        assert (refused.value.details["role"], refused.value.details["version"]) == (role, 1)
    approval = chat.state.calls["p1"].approval
    assert approval is not None and {"pia", "ray"} <= barred_voters(approval, "alice")
    # nor by delegation: ray for tina, or dan for ray
    delegations = Delegations("acme")
    window = {"starts_at": NOW - timedelta(hours=1), "ends_at": NOW + timedelta(days=1)}
    by_ray = delegations.grant(TINA, DelegationRequest(delegate="ray", **window), NOW)
    with pytest.raises(PolicyAuthorError) as delegate:
        vote(chat, delegations.acting(by_ray.id, RAY, NOW))
    assert delegate.value.details["person"] == "ray"
    for_ray = delegations.grant(RAY, DelegationRequest(delegate="dan", roles=["treasury"],
                                                       **window), NOW)
    with pytest.raises(PolicyAuthorError) as delegator:
        vote(chat, delegations.acting(for_ray.id, Decider("dan"), NOW))
    assert delegator.value.details["person"] == "ray"
    assert chat.pending_events == []  # nothing written by a refusal
    [_, done] = [vote(chat, TINA), vote(chat, TOM)]
    assert done[0].outcome == "approved"
