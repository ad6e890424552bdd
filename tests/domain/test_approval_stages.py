"""Staged approvals and segregation across stages, pure: the Chat aggregate alone.

"The team lead, then treasury, then for over 100,000 the CFO": each test holds one call
under `BANK`, votes at given times, and asserts on the events recorded or the typed
error raised (and that a refusal recorded nothing).
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
    ToolContext,
    ToolRequest,
    tool,
)
from interlock.domain.chat.approval_events import ApprovalRequested, ApprovalVoted
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.events import ChatEvent
from interlock.domain.chat.policies import Approval, ApprovalState, ApprovalTerms
from interlock.domain.chat.rules import barred_voters
from interlock.domain.chat.stages import Stage
from interlock.domain.errors import (
    AlreadyVotedError,
    ConflictingRolesError,
    ForbiddenError,
    InterlockError,
    InterruptExpiredError,
    StageSegregationError,
)

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SOON = T0 + timedelta(minutes=1)


class Pay(BaseModel):
    amount: int
    to: str


@tool(name="pay")
async def pay(input: Pay, ctx: ToolContext) -> dict[str, Any]:
    return {"paid": input.amount}


TOOLS = {"pay": pay}
SMALL = {"amount": 5000, "to": "acme"}
LARGE = {"amount": 150_000, "to": "acme"}


def over_100k(p: Pay) -> bool:
    return p.amount > 100_000


BANK = Approval(stages=[
    Stage("team lead", roles=["lead"]),
    Stage("treasury", roles=["treasury"], quorum=2, expires_in=timedelta(hours=4),
          escalate_after=timedelta(hours=1), escalate_to=["head_of_treasury"]),
    Stage("CFO", roles=["cfo"], when=over_100k),
])


def held(policy: Approval = BANK, payment: dict[str, Any] = SMALL) -> Chat:
    """Alice asked for a payment; `policy` held call p1 at T0 (its `when`s of `payment`)."""
    chat = Chat.start("bank", actor="alice", tenant="t1")
    chat.send_message("pay acme", actor="alice")
    request = ToolRequest(ref="p1", name="pay", input=payment)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    chat.hold_for_approval("p1", policy.terms(T0, "alice", policy.stages_apply(Pay(**payment))))
    chat.finish_turn("interrupted")
    chat.collect_events()
    return chat


def who(name: str, *roles: str) -> Decider:
    return Decider(name, frozenset(roles))


def vote(chat: Chat, decider: Decider, entry: Any, at: datetime = SOON) -> list[ChatEvent]:
    chat.resume([], [], actor=decider.id, tools=TOOLS, votes=[entry], decider=decider, now=at,
                policy=lambda name: BANK)
    return chat.collect_events()


def refused(error: type[InterlockError], chat: Chat, decider: Decider, entry: Any,
            at: datetime = SOON) -> InterlockError:
    before, version = chat.state.model_copy(deep=True), chat.version
    with pytest.raises(error) as caught:
        vote(chat, decider, entry, at)
    assert chat.pending_events == [] and chat.version == version and chat.state == before
    return caught.value


def approve(payment: dict[str, Any] = SMALL) -> ApproveEntry:
    return ApproveEntry(ref="p1", name="pay", input_sha256=sha256_hex(payment))


def voted(events: list[ChatEvent]) -> list[tuple[str, int | None, int | None, str]]:
    return [(e.actor, e.stage, e.next_stage, e.outcome) for e in events
            if isinstance(e, ApprovalVoted)]


def stage(chat: Chat) -> str:
    approval = chat.state.calls["p1"].approval
    assert approval is not None
    current = approval.current_stage()
    assert current is not None
    return current.name


def test_a_call_passes_stage_by_stage_and_a_when_skips_a_stage() -> None:
    chat = held()
    assert stage(chat) == "team lead"
    assert voted(vote(chat, who("lee", "lead"), approve())) == [("lee", 0, 1, "pending")]
    assert stage(chat) == "treasury" and chat.status == "interrupted"
    assert voted(vote(chat, who("tom", "treasury"), approve())) == [("tom", 1, None, "pending")]
    # 5,000 is not over 100,000: the CFO's stage is skipped and treasury's quorum approves it
    assert voted(vote(chat, who("tia", "treasury"), approve())) == [("tia", 1, None, "approved")]
    call = chat.state.calls["p1"]
    assert (call.status, call.decided_by) == ("approved", "tia")


def test_over_the_threshold_the_cfo_decides_last() -> None:
    chat = held(payment=LARGE)
    current = chat.state.calls["p1"].approval.current_stage()  # type: ignore[union-attr]
    assert current is not None and (current.index, current.of, current.skipped) == (0, 3, [])
    vote(chat, who("lee", "lead"), approve(LARGE))
    vote(chat, who("tom", "treasury"), approve(LARGE))
    assert voted(vote(chat, who("tia", "treasury"), approve(LARGE))) == [
        ("tia", 1, 2, "pending")]
    assert stage(chat) == "CFO"
    assert voted(vote(chat, who("cora", "cfo"), approve(LARGE))) == [
        ("cora", 2, None, "approved")]


def test_only_the_current_stages_deciders_vote() -> None:
    chat = held(payment=LARGE)
    error = refused(ForbiddenError, chat, who("cora", "cfo"), approve(LARGE))
    assert error.details["reason"] == "not_a_decider" and error.details["roles"] == ["lead"]
    vote(chat, who("lee", "lead"), approve(LARGE))
    error = refused(ForbiddenError, chat, who("lou", "lead"), approve(LARGE))
    assert error.details["roles"] == ["treasury"]


def test_a_rejection_at_any_stage_ends_the_call() -> None:
    chat = held()
    vote(chat, who("lee", "lead"), approve())
    no = RejectEntry(ref="p1", name="pay", reason="not this quarter")
    assert voted(vote(chat, who("tom", "treasury"), no)) == [("tom", 1, None, "rejected")]
    assert chat.state.calls["p1"].status == "rejected"


def test_an_edit_at_stage_two_goes_back_to_stage_one_and_earlier_votes_stop_counting() -> None:
    chat = held()
    vote(chat, who("lee", "lead"), approve())
    vote(chat, who("tom", "treasury"), approve())
    edit = EditEntry(ref="p1", name="pay", input=LARGE, reason="the full invoice",
                     input_sha256=sha256_hex(SMALL))
    [edited] = vote(chat, who("tia", "treasury"), edit)
    assert isinstance(edited, ApprovalVoted) and edited.stages_apply == [True, True, True]
    # back at the team lead, and the new amount goes through the CFO too (by BANK's when)
    assert stage(chat) == "team lead"
    approval = chat.state.calls["p1"].approval
    assert approval is not None and approval.stage_votes() == []
    assert voted(vote(chat, who("lee", "lead"), approve(LARGE))) == [("lee", 0, 1, "pending")]
    vote(chat, who("tom", "treasury"), approve(LARGE))
    # tia edited it: she asks for this input now and may not approve it
    refused(ForbiddenError, chat, who("tia", "treasury"), approve(LARGE))
    assert voted(vote(chat, who("ted", "treasury"), approve(LARGE))) == [
        ("ted", 1, 2, "pending")]


def test_an_edit_is_judged_by_the_policys_whens_and_without_the_policy_by_every_stage() -> None:
    edit = EditEntry(ref="p1", name="pay", input=SMALL, reason="less",
                     input_sha256=sha256_hex(LARGE))
    chat = held(payment=LARGE)
    [edited] = vote(chat, who("lee", "lead"), edit)
    assert isinstance(edited, ApprovalVoted) and edited.stages_apply == [True, True, False]
    assert chat.state.calls["p1"].approval.current_stage().skipped == ["CFO"]  # type: ignore[union-attr]
    chat = held(payment=LARGE)
    decider = who("lee", "lead")
    chat.resume([], [], actor="lee", tools=TOOLS, votes=[edit], decider=decider, now=SOON)
    [edited] = chat.collect_events()
    assert isinstance(edited, ApprovalVoted) and edited.stages_apply == [True, True, True]


def test_each_stage_expires_and_escalates_from_the_moment_it_opened() -> None:
    """A stage opens when the vote that completed the one before it is recorded."""
    chat = held()
    assert chat.expire("p1", T0 + timedelta(days=30)) is False  # the lead's stage has no deadline
    [completed] = vote(chat, who("lee", "lead"), approve())
    opened = completed.timestamp
    assert chat.escalate("p1", opened + timedelta(minutes=59)) is False
    assert chat.escalate("p1", opened + timedelta(hours=1)) is True
    chat.collect_events()
    vote(chat, who("hal", "head_of_treasury"), approve(), at=opened + timedelta(hours=2))
    due = opened + timedelta(hours=4)
    refused(InterruptExpiredError, chat, who("tom", "treasury"), approve(), at=due)
    assert chat.expire("p1", due - timedelta(microseconds=1)) is False
    assert chat.expire("p1", due) is True


def test_nobody_approves_two_stages_of_one_call() -> None:
    chat = held()
    both = who("bea", "lead", "treasury")
    vote(chat, both, approve())
    error = refused(StageSegregationError, chat, both, approve())
    assert error.details == {"ref": "p1", "actor": "bea", "reason": "other_stage",
                             "voted_stage": "team lead", "stage": "treasury"}
    assert isinstance(error, ForbiddenError)
    approval = chat.state.calls["p1"].approval
    assert approval is not None and "bea" in barred_voters(approval, "alice")  # the inbox agrees


def test_one_vote_per_person_per_stage_still_holds() -> None:
    chat = held()
    vote(chat, who("lee", "lead"), approve())
    vote(chat, who("tom", "treasury"), approve())
    refused(AlreadyVotedError, chat, who("tom", "treasury"), approve())


def test_a_voter_holding_both_roles_of_a_conflicting_pair_is_refused() -> None:
    policy = Approval(roles=["treasury"], conflicts=[("trader", "treasury")])
    chat = held(policy)
    error = refused(ConflictingRolesError, chat, who("tex", "treasury", "trader"), approve())
    assert error.details["reason"] == "conflicting_roles"
    assert error.details["roles"] == ["trader", "treasury"]
    admin = who("ada", "admin", "trader", "treasury")
    refused(ConflictingRolesError, chat, admin, approve())
    assert voted(vote(chat, who("tom", "treasury"), approve())) == [("tom", None, None, "approved")]


def test_a_one_stage_policy_records_what_it_recorded_before() -> None:
    """No stage fields in a plain policy's terms, votes or fingerprint description."""
    plain = Approval(roles=["treasury"], quorum=2)
    assert "stages" not in plain.describe() and "conflicts" not in plain.describe()
    dumped = plain.terms(T0, "alice").model_dump(mode="json")
    assert set(dumped) == {"roles", "groups", "quorum", "reject_rejects", "requested_by",
                           "expires_at", "escalate_at", "escalate_to", "escalate_to_groups"}
    chat = held(plain)
    [event] = vote(chat, who("tom", "treasury"), approve())
    body = event.model_dump(mode="json")
    assert not {"stage", "next_stage", "stages_apply"} & set(body)
    state = chat.state.calls["p1"].approval
    assert state is not None and state.current_stage() is None
    assert "stage" not in state.model_dump(mode="json")["votes"][0]


def test_an_old_log_without_stages_reads_as_one_stage() -> None:
    old = {"roles": ["treasury"], "groups": [], "quorum": 1, "reject_rejects": True,
           "requested_by": "alice", "expires_at": None, "escalate_at": None,
           "escalate_to": [], "escalate_to_groups": []}
    state = ApprovalState.opened(ApprovalTerms.model_validate(old))
    assert state.stage is None and state.deciders() == ({"treasury"}, set())


def test_the_log_carries_the_stages_and_a_replay_reads_them_as_recorded() -> None:
    chat = Chat.start("bank", actor="alice", tenant="t1")
    chat.send_message("pay", actor="alice")
    request = ToolRequest(ref="p1", name="pay", input=LARGE)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    chat.hold_for_approval("p1", BANK.terms(T0, "alice", BANK.stages_apply(Pay(**LARGE))))
    chat.finish_turn("interrupted")
    vote(chat, who("lee", "lead"), approve(LARGE))  # collects the earlier events too
    requested = ApprovalRequested.model_validate_json(
        ApprovalRequested(originator_id=chat.id, originator_version=9, timestamp=T0, ref="p1",
                          terms=BANK.terms(T0, "alice"), input_sha256="0" * 64).model_dump_json())
    assert [s.name for s in requested.terms.stages or []] == ["team lead", "treasury", "CFO"]


def test_a_stage_policy_is_checked_when_declared() -> None:
    with pytest.raises(ValueError, match="on each Stage"):
        Approval(roles=["lead"], stages=[Stage("one")])
    with pytest.raises(ValueError, match="names must differ"):
        Approval(stages=[Stage("one"), Stage("one")])
    with pytest.raises(ValueError, match="two distinct roles"):
        Approval(conflicts=[("a", "a")])
    with pytest.raises(ValueError, match="quorum"):
        Stage("one", quorum=0)


def test_a_fork_of_an_edited_call_goes_through_the_stages_its_new_input_needs() -> None:
    """Raised over the CFO's threshold by an edit, a call forked afterwards still needs the
    CFO: the fork asks afresh by the stages the current input goes through, not those the
    first input went through."""
    chat = held()  # 5,000: the CFO's stage does not apply
    edit = EditEntry(ref="p1", name="pay", input=LARGE, reason="the full invoice",
                     input_sha256=sha256_hex(SMALL))
    vote(chat, who("lee", "lead"), edit)
    fork = Chat.fork(chat, agent="bank", actor="dana")
    call = fork.state.calls["p1"]
    assert call.input == LARGE and call.approval is not None
    assert call.approval.stages_apply == [True, True, True] and call.approval.votes == []
    assert stage(fork) == "team lead"
    fork.collect_events()
    vote(fork, who("leo", "lead"), approve(LARGE))
    vote(fork, who("tom", "treasury"), approve(LARGE))
    assert voted(vote(fork, who("ted", "treasury"), approve(LARGE))) == [
        ("ted", 1, 2, "pending")]
    assert stage(fork) == "CFO" and fork.status == "interrupted"
