"""The approval rules of the Chat aggregate, pure: no store, no service, no I/O.

Each test builds a chat whose call is held for approval, calls its commands at given
times, and asserts on the events it recorded or the typed error it raised (and that a
refusal recorded nothing). `test_approvals.py` walks the same rules through a store.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from interlock.domain import (
    ApproveEntry,
    Chat,
    Decider,
    EditEntry,
    Message,
    Part,
    RejectEntry,
    RespondEntry,
    RestartEntry,
    ToolContext,
    ToolRequest,
    tool,
)
from interlock.domain.chat.approval_events import (
    ApprovalEscalated,
    ApprovalVoted,
    InterruptExpired,
    InterruptWithdrawn,
)
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.policies import Approval, ApprovalState, Vote
from interlock.domain.chat.rules import barred_voters
from interlock.domain.errors import (
    AlreadyVotedError,
    DuplicateRefError,
    EmptyResumeError,
    ForbiddenError,
    InterlockError,
    InterruptExpiredError,
    InterruptNameMismatchError,
    InterruptNotPendingError,
    InvalidRequestError,
    NotAnApprovalError,
    StaleInterruptError,
    UnknownInterruptError,
)

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SOON = T0 + timedelta(minutes=1)


class Pay(BaseModel):
    amount: int
    to: str


@tool(name="pay")
async def pay(input: Pay, ctx: ToolContext) -> dict[str, Any]:
    return {"paid": input.amount}


@tool(name="ask", side_effects=False, interrupts=True, distinct_approver=True)
async def ask(input: Pay, ctx: ToolContext) -> dict[str, Any]:
    ctx.interrupt({"confirm": input.amount})
    return {}


TOOLS = {t.name: t for t in (pay, ask)}
PAYMENT = {"amount": 5000, "to": "acme"}
EDITED = {"amount": 9999, "to": "mallory"}


def treasurer(name: str) -> Decider:
    return Decider(name, frozenset({"treasury"}))


def held(policy: Approval, payment: dict[str, Any] = PAYMENT) -> Chat:
    """Alice asked for a payment; its policy held call p1 for approval at T0."""
    chat = Chat.start("bank", actor="alice", tenant="t1")
    chat.send_message("pay acme", actor="alice")
    request = ToolRequest(ref="p1", name="pay", input=payment)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    chat.hold_for_approval("p1", policy.terms(T0, "alice"))
    chat.finish_turn("interrupted")
    chat.collect_events()
    return chat


def vote(chat: Chat, who: Decider, *entries: Any, at: datetime = SOON) -> list[Any]:
    """`who` votes at `at`; the events it recorded."""
    chat.resume([], [], actor=who.id, tools=TOOLS, votes=list(entries), decider=who, now=at)
    return chat.collect_events()


def refused(error: type[InterlockError], chat: Chat, who: Decider, *entries: Any,
            at: datetime = SOON) -> InterlockError:
    """The vote raises `error` and the chat is left exactly as it was."""
    before, version = chat.state.model_copy(deep=True), chat.version
    with pytest.raises(error) as caught:
        vote(chat, who, *entries, at=at)
    assert chat.pending_events == [] and chat.version == version and chat.state == before
    return caught.value


def outcomes(events: list[Any]) -> list[tuple[str, str, str]]:
    return [(e.actor, e.vote, e.outcome) for e in events if isinstance(e, ApprovalVoted)]


def approve(sha: dict[str, Any] | None = None) -> ApproveEntry:
    return ApproveEntry(ref="p1", name="pay", input_sha256=None if sha is None else sha256_hex(sha))


def test_quorum_needs_that_many_distinct_approvers() -> None:
    chat = held(Approval(roles=["treasury"], quorum=3))
    assert outcomes(vote(chat, treasurer("bob"), approve())) == [("bob", "approve", "pending")]
    assert outcomes(vote(chat, treasurer("carol"), approve())) == [
        ("carol", "approve", "pending")]
    assert chat.status == "interrupted"
    assert outcomes(vote(chat, treasurer("dave"), approve())) == [("dave", "approve", "approved")]
    call = chat.state.calls["p1"]
    assert (call.status, call.decision, call.decided_by) == ("approved", "approve", "dave")
    assert chat.status == "running"


def test_one_person_counts_once_however_their_id_is_spelt() -> None:
    chat = held(Approval(roles=["treasury"], quorum=2))
    vote(chat, treasurer("bob"), approve())
    for spelling in ("bob", "BOB", " Bob "):
        error = refused(AlreadyVotedError, chat, treasurer(spelling), approve())
        assert error.details["vote"] == "approve"
    assert chat.state.calls["p1"].approval.approvers(  # type: ignore[union-attr]
        sha256_hex(PAYMENT), "alice") == {"bob"}


def test_quorum_counts_people_not_spellings_nor_the_requester() -> None:
    """What `_outcome` counts: a log whose votes bypassed `vote_of` still counts each
    person once, and never the requester."""
    sha = sha256_hex(PAYMENT)
    votes = [Vote(actor=a, kind="approve", at=T0, input_sha256=sha)
             for a in ("bob", "Bob ", "BOB", "alice", "carol")]
    terms = Approval(roles=["treasury"]).terms(T0, "alice")
    assert ApprovalState(terms=terms, votes=votes).approvers(sha, " Alice") == {"bob", "carol"}


def test_the_requester_is_barred_however_their_id_is_spelt() -> None:
    chat = held(Approval(roles=["treasury"]))
    for spelling in ("alice", "Alice ", "ALICE"):
        error = refused(ForbiddenError, chat, treasurer(spelling), approve())
        assert error.details["reason"] == "requester"
    admin = Decider("alice", frozenset({"admin"}))
    assert refused(ForbiddenError, chat, admin, approve()).details["reason"] == "requester"


def test_only_the_policys_roles_or_groups_or_an_admin_decide() -> None:
    chat = held(Approval(roles=["treasury"], groups=["finance"], quorum=3))
    error = refused(ForbiddenError, chat, Decider("mallory", frozenset({"approver"})), approve())
    assert error.details["reason"] == "not_a_decider"
    assert error.details["roles"] == ["treasury"] and error.details["groups"] == ["finance"]
    vote(chat, treasurer("bob"), approve())
    vote(chat, Decider("gina", frozenset(), frozenset({"finance"})), approve())
    done = vote(chat, Decider("root", frozenset({"admin"})), approve())
    assert outcomes(done) == [("root", "approve", "approved")]


def test_a_tool_demanding_four_eyes_refuses_its_requester_on_respond() -> None:
    chat = Chat.start("bank", actor="alice", tenant="t1")
    chat.send_message("ask", actor="alice")
    request = ToolRequest(ref="a1", name="ask", input=PAYMENT)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    chat.record_interrupted("a1", {"confirm": 5000})
    chat.finish_turn("interrupted")
    chat.collect_events()
    answer = RespondEntry(ref="a1", name="ask", output={})
    with pytest.raises(ForbiddenError) as caught:
        chat.resume([answer], [], actor="Alice", tools=TOOLS)
    assert caught.value.details["reason"] == "requester" and chat.pending_events == []
    chat.resume([answer], [], actor="bob", tools=TOOLS)
    assert [type(e).__name__ for e in chat.collect_events()] == ["Responded"]


def test_a_deadline_fails_closed_at_its_time_exactly_once() -> None:
    chat = held(Approval(roles=["treasury"], expires_in=timedelta(hours=1)))
    due = T0 + timedelta(hours=1)
    assert chat.expire("p1", due - timedelta(microseconds=1)) is False
    assert chat.collect_events() == []
    error = refused(InterruptExpiredError, chat, treasurer("bob"), approve(), at=due)
    assert error.details["expired_at"] == due.isoformat().replace("+00:00", "Z")
    assert chat.expire("p1", due) is True
    [expired] = chat.collect_events()
    assert isinstance(expired, InterruptExpired) and expired.expires_at == due
    assert expired.input_sha256 == sha256_hex(PAYMENT)
    call = chat.state.calls["p1"]
    assert call.status == "expired" and call.output == {"expired": True, "at": due.isoformat()}
    assert chat.expire("p1", due + timedelta(hours=1)) is False  # once
    chat.finish_turn("stop")  # the model was told (the service's part)
    chat.collect_events()
    refused(InterruptExpiredError, chat, treasurer("bob"), approve(), at=due)


def test_escalation_widens_who_decides_at_its_time_exactly_once() -> None:
    chat = held(Approval(roles=["treasury"], escalate_after=timedelta(minutes=30),
                         escalate_to=["cfo"]))
    cfo, at = Decider("zoe", frozenset({"cfo"})), T0 + timedelta(minutes=30)
    assert refused(ForbiddenError, chat, cfo, approve()).details["reason"] == "not_a_decider"
    assert chat.escalate("p1", at - timedelta(seconds=1)) is False
    assert chat.escalate("p1", at) is True
    assert [type(e) for e in chat.collect_events()] == [ApprovalEscalated]
    assert chat.escalate("p1", at + timedelta(hours=1)) is False
    assert chat.collect_events() == []
    assert outcomes(vote(chat, cfo, approve(), at=at)) == [("zoe", "approve", "approved")]


def test_withdraw_by_the_requester_or_an_admin_only_with_a_reason() -> None:
    chat = held(Approval(roles=["treasury"]))
    with pytest.raises(ForbiddenError) as outsider:
        chat.withdraw(["p1"], decider=treasurer("bob"), reason="mine now")
    assert outsider.value.details["reason"] == "not_the_requester"
    with pytest.raises(InvalidRequestError):
        chat.withdraw(["p1"], decider=Decider("alice"), reason="  ")
    with pytest.raises(UnknownInterruptError):
        chat.withdraw(["p1", "nope"], decider=Decider("alice"), reason="wrong")
    with pytest.raises(DuplicateRefError):
        chat.withdraw(["p1", "p1"], decider=Decider("alice"), reason="wrong")
    assert chat.pending_events == [] and chat.state.calls["p1"].status == "interrupted"
    chat.withdraw(["p1"], decider=Decider(" Alice"), reason="wrong payee")
    [withdrawn] = chat.collect_events()
    assert isinstance(withdrawn, InterruptWithdrawn) and withdrawn.reason == "wrong payee"
    assert chat.state.calls["p1"].output == {
        "withdrawn": True, "by": " Alice", "reason": "wrong payee"}
    chat.finish_turn("stop")
    with pytest.raises(InterruptNotPendingError):
        chat.withdraw(["p1"], decider=Decider("root", frozenset({"admin"})), reason="again")


def test_an_admin_may_withdraw_what_someone_else_asked_for() -> None:
    chat = held(Approval(roles=["treasury"]))
    chat.withdraw(["p1"], decider=Decider("root", frozenset({"admin"})), reason="fraud")
    assert [type(e) for e in chat.collect_events()] == [InterruptWithdrawn]


def test_an_edit_makes_its_author_the_requester_and_earlier_votes_stop_counting() -> None:
    chat = held(Approval(roles=["treasury"], quorum=2))
    vote(chat, treasurer("bob"), approve(PAYMENT))
    edit = EditEntry(ref="p1", name="pay", input=EDITED, input_sha256=sha256_hex(PAYMENT),
                     reason="a smaller amount")
    [edited] = vote(chat, treasurer("carol"), edit)
    assert (edited.vote, edited.outcome, edited.edited_input) == ("edit", "pending", EDITED)
    assert edited.input_sha256 == sha256_hex(PAYMENT)
    call = chat.state.calls["p1"]
    assert call.requester == "carol" and call.original_input == PAYMENT
    assert refused(ForbiddenError, chat, treasurer("carol"), approve(EDITED)
                   ).details["reason"] == "requester"
    # bob's yes was given on 5,000: it does not count, and he may vote on the new input
    assert outcomes(vote(chat, treasurer("dave"), approve(EDITED))) == [
        ("dave", "approve", "pending")]
    assert outcomes(vote(chat, treasurer("bob"), approve(EDITED))) == [
        ("bob", "approve", "approved")]


def test_votes_before_an_edit_never_count_after_it_even_if_the_input_comes_back() -> None:
    chat = held(Approval(roles=["treasury"], quorum=2))
    vote(chat, treasurer("bob"), approve(PAYMENT))
    vote(chat, treasurer("carol"), EditEntry(ref="p1", name="pay", input=EDITED,
                                              input_sha256=sha256_hex(PAYMENT),
                                             reason="a smaller amount"))
    vote(chat, treasurer("dave"), EditEntry(ref="p1", name="pay", input=PAYMENT,
                                             input_sha256=sha256_hex(EDITED),
                                            reason="a smaller amount"))
    approval = chat.state.calls["p1"].approval
    assert approval is not None and approval.approvers(sha256_hex(PAYMENT), "dave") == set()
    assert "bob" not in barred_voters(approval, "dave")
    assert outcomes(vote(chat, treasurer("erin"), approve(PAYMENT))) == [
        ("erin", "approve", "pending")]  # bob's old yes would have made it two
    assert outcomes(vote(chat, treasurer("bob"), approve(PAYMENT))) == [
        ("bob", "approve", "approved")]


def test_a_vote_without_a_hash_never_counts_toward_an_input_someone_else_put_in() -> None:
    """D29: two yeses on 5,000 to acme must not run 9,999 to mallory after an edit."""
    chat = held(Approval(roles=["treasury"], quorum=2))
    vote(chat, treasurer("bob"), approve())  # names no input: the one requested, unedited
    vote(chat, treasurer("mallory"), EditEntry(ref="p1", name="pay", input=EDITED,
                                               reason="a smaller amount"))
    for who in ("bob", "carol", "alice"):
        error = refused(StaleInterruptError, chat, treasurer(who), approve())
        assert error.details == {"ref": "p1", "expected_input_sha256": None,
                                 "input_sha256": sha256_hex(EDITED), "changed_by": "mallory"}
    refused(StaleInterruptError, chat, treasurer("bob"),
            RejectEntry(ref="p1", name="pay", reason="no"))
    # who saw the new input names it, and counts toward it
    assert outcomes(vote(chat, treasurer("bob"), approve(EDITED))) == [
        ("bob", "approve", "pending")]
    assert chat.state.calls["p1"].status == "interrupted"


def test_a_restart_that_replaced_the_input_stales_a_respond_without_a_hash() -> None:
    """D29 on a tool's own interrupt: bob replaced the input; carol's hashless respond was
    given on the input as requested, and bob may answer his own input knowingly."""
    chat = Chat.start("bank", actor="alice", tenant="t1")
    chat.send_message("ask", actor="alice")
    request = ToolRequest(ref="a1", name="pay", input=PAYMENT)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    chat.record_interrupted("a1", None)
    chat.finish_turn("interrupted")
    chat.resume([], [RestartEntry(ref="a1", name="pay", replace_input=EDITED)], actor="bob",
                tools=TOOLS)
    chat.record_interrupted("a1", None)  # the tool ran again and paused on bob's input
    chat.finish_turn("interrupted")
    chat.collect_events()
    answer = RespondEntry(ref="a1", name="pay", output={"paid": 1})
    with pytest.raises(StaleInterruptError):
        chat.resume([answer], [], actor="carol", tools=TOOLS)
    assert chat.pending_events == []
    named = answer.model_copy(update={"input_sha256": sha256_hex(EDITED)})
    chat.resume([named], [], actor="carol", tools=TOOLS)
    assert [type(e).__name__ for e in chat.collect_events()] == ["Responded"]


def test_a_rejection_rejects_unless_the_policy_only_records_it() -> None:
    no = RejectEntry(ref="p1", name="pay", reason="wrong payee")
    chat = held(Approval(roles=["treasury"]))
    assert outcomes(vote(chat, treasurer("bob"), no)) == [("bob", "reject", "rejected")]
    call = chat.state.calls["p1"]
    assert call.status == "rejected"
    assert call.output == {"rejected": True, "by": "bob", "reason": "wrong payee"}
    lenient = held(Approval(roles=["treasury"], reject_rejects=False))
    assert outcomes(vote(lenient, treasurer("bob"), no)) == [("bob", "reject", "pending")]
    assert lenient.state.calls["p1"].status == "interrupted"


def test_a_vote_on_another_input_than_the_pending_one_is_stale() -> None:
    chat = held(Approval(roles=["treasury"]))
    error = refused(StaleInterruptError, chat, treasurer("bob"), approve(EDITED))
    assert error.details["expected_input_sha256"] == sha256_hex(EDITED)
    assert error.details["input_sha256"] == sha256_hex(PAYMENT)
    assert outcomes(vote(chat, treasurer("bob"), approve(PAYMENT))) == [
        ("bob", "approve", "approved")]


def test_a_vote_naming_another_tool_is_refused() -> None:
    chat = held(Approval(roles=["treasury"]))
    error = refused(InterruptNameMismatchError, chat, treasurer("bob"),
                    ApproveEntry(ref="p1", name="refund"))
    assert error.details["ref"] == "p1"


def test_a_vote_on_an_unknown_ref_refuses_the_whole_batch() -> None:
    chat = held(Approval(roles=["treasury"]))
    error = refused(UnknownInterruptError, chat, treasurer("bob"),
                    approve(), ApproveEntry(ref="p9", name="pay"))
    assert error.details == {"ref": "p9"}


def test_a_ref_twice_in_one_batch_is_refused() -> None:
    chat = held(Approval(roles=["treasury"], quorum=2))
    error = refused(DuplicateRefError, chat, treasurer("bob"), approve(),
                    RejectEntry(ref="p1", name="pay", reason="no"))
    assert error.details == {"ref": "p1"}


def test_an_empty_resume_is_refused() -> None:
    chat = held(Approval(roles=["treasury"]))
    refused(EmptyResumeError, chat, treasurer("bob"))


def test_a_decided_call_takes_no_more_votes() -> None:
    chat = held(Approval(roles=["treasury"]))
    vote(chat, treasurer("bob"), approve())
    chat.record_completed("p1", {"paid": 5000})
    chat.finish_turn("stop")
    chat.collect_events()
    error = refused(InterruptNotPendingError, chat, treasurer("carol"), approve())
    assert error.details["decided_by"] == "bob" and error.details["decision"] == "approve"


def test_a_vote_cannot_decide_a_tools_own_interrupt() -> None:
    chat = Chat.start("bank", actor="alice", tenant="t1")
    chat.send_message("ask", actor="alice")
    request = ToolRequest(ref="a1", name="ask", input=PAYMENT)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    chat.record_interrupted("a1", None)
    chat.finish_turn("interrupted")
    chat.collect_events()
    refused(NotAnApprovalError, chat, treasurer("bob"), ApproveEntry(ref="a1", name="ask"))


def test_closing_before_an_erasure_withdraws_every_pending_call_and_ends_the_turn() -> None:
    chat = held(Approval(roles=["treasury"]))
    assert chat.close_pending(actor="interlock:erasure", reason="erased") == ["p1"]
    withdrawn, finished = chat.collect_events()
    assert isinstance(withdrawn, InterruptWithdrawn) and withdrawn.actor == "interlock:erasure"
    assert type(finished).__name__ == "TurnFinished" and chat.status == "idle"
    assert chat.close_pending(actor="interlock:erasure", reason="erased") == []
    assert chat.collect_events() == []


def test_a_replay_reads_each_vote_as_recorded_without_judging_it_again() -> None:
    """Replay (a reload, a rebuild) applies each vote's recorded outcome, which the rules
    judged when it was cast, so the chat reads back exactly as it was decided."""
    chat = Chat.start("bank", actor="alice", tenant="t1")
    log = list(chat.pending_events)
    chat.pending_events.clear()
    chat.send_message("pay", actor="alice")
    request = ToolRequest(ref="p1", name="pay", input=PAYMENT)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    chat.hold_for_approval("p1", Approval(roles=["treasury"], quorum=2).terms(T0, "alice"))
    chat.finish_turn("interrupted")
    log += chat.collect_events()
    log += vote(chat, treasurer("bob"), approve())
    log += vote(chat, treasurer("carol"), EditEntry(ref="p1", name="pay", input=EDITED,
                                                    reason="a smaller amount"))
    log += vote(chat, treasurer("dave"), approve(EDITED))
    log += vote(chat, treasurer("erin"), approve(EDITED))
    replayed = log[0].mutate(None)
    for event in log[1:]:
        event.mutate(replayed)
    assert replayed.state == chat.state and replayed.version == chat.version
    assert replayed.state.calls["p1"].status == "approved"
    assert [(v.actor, v.kind) for v in replayed.state.calls["p1"].approval.votes] == [  # type: ignore[union-attr]
        ("bob", "approve"), ("carol", "edit"), ("dave", "approve"), ("erin", "approve")]
