"""What the console says about a policy: deciders, tally, time left, why a visitor cannot vote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from interlock.api.auth import DEV_PRINCIPAL, Principal
from interlock.api.ui.policy import deciders, held_summary, policy_view, time_left, why_not_vote
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.policies import ApprovalState, ApprovalTerms, Vote
from interlock.domain.chat.state import ToolCall
from interlock.projections.interface import InboxRow

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
OLD, NEW = {"amount": 5000}, {"amount": 900}


def _call(state: ApprovalState, input: object = NEW, input_by: str | None = None) -> ToolCall:
    return ToolCall(ref="r1", name="pay", input=input, turn=1, requested_at=NOW,
                    requested_by="alice", input_by=input_by, status="interrupted",
                    interrupted_at=NOW, approval=state)


def _state(votes: list[Vote], **terms: object) -> ApprovalState:
    base: dict[str, object] = {"roles": ["treasury"], "quorum": 2, "requested_by": "alice",
                               "expires_at": NOW + timedelta(hours=1)}
    return ApprovalState(terms=ApprovalTerms.model_validate({**base, **terms}), votes=votes)


def _vote(actor: str, kind: str, input: object) -> Vote:
    return Vote.model_validate({"actor": actor, "kind": kind, "at": NOW,
                                "input_sha256": sha256_hex(input)})


@pytest.mark.parametrize(("left", "says"), [
    (timedelta(hours=2, minutes=5, seconds=30), "2 h 5 min left"),
    (timedelta(minutes=59, seconds=59), "59 min left"),
    (timedelta(seconds=40), "40 s left"),
    (timedelta(0), "past its deadline: it fails closed"),
    (timedelta(minutes=-3), "past its deadline: it fails closed"),
])
def test_time_left_reads_as_people_say_it(left: timedelta, says: str) -> None:
    assert time_left(NOW + left, NOW) == says


def test_no_deadline_has_no_time_left() -> None:
    assert time_left(None, NOW) is None


def test_deciders_name_roles_and_groups_and_widen_on_escalation() -> None:
    state = _state([], roles=["treasury"], groups=["finance"], escalate_to=["cfo"],
                   escalate_at=NOW + timedelta(minutes=30))
    assert deciders(state) == "role treasury, or group finance (an admin always may)"
    escalated = state.model_copy(update={"escalated": True})
    assert deciders(escalated) == ("roles cfo or treasury, or group finance "
                                   "(an admin always may)")


def test_only_approvals_of_the_current_input_count_and_earlier_ones_are_marked() -> None:
    votes = [_vote("tina", "approve", OLD), _vote("tom", "edit", NEW),
             _vote("uma", "approve", NEW)]
    view = policy_view(_call(_state(votes), input_by="tom"), NOW)
    assert view is not None
    assert (view.tally, view.requester) == ("1 of 2 approvals", "tom")
    assert [(v.actor, v.current) for v in view.votes] == [
        ("tina", False), ("tom", True), ("uma", True)]
    assert view.time_left == "1 h 0 min left"


def test_a_tool_s_own_interrupt_has_no_policy() -> None:
    call = _call(_state([])).model_copy(update={"approval": None})
    assert policy_view(call, NOW) is None


@pytest.mark.parametrize(("who", "says"), [
    (Principal(id="bob", tenant="acme", roles=frozenset({"approver"})),
     "Routing: bob may not decide pay r1: it needs the role treasury"),
    (Principal(id="Alice", tenant="acme", roles=frozenset({"admin"})),
     "Four-eyes: Alice sent the turn of r1"),
    (Principal(id="tina", tenant="acme", roles=frozenset({"treasury"})),
     "You cannot vote: tina already voted (approve)"),
])
def test_why_not_is_the_domain_s_reason(who: Principal, says: str) -> None:
    call = _call(_state([_vote("tina", "approve", NEW)]))
    reason = why_not_vote(who, call, NOW)
    assert reason is not None and reason.startswith(says)


def test_a_treasurer_who_has_not_voted_may_vote_until_the_deadline() -> None:
    tom = Principal(id="tom", tenant="acme", roles=frozenset({"treasury"}))
    call = _call(_state([]))
    assert why_not_vote(tom, call, NOW) is None
    late = why_not_vote(tom, call, NOW + timedelta(hours=1))
    assert late is not None and "expired" in late


def test_an_inbox_row_shows_its_tally_and_time_left() -> None:
    state = _state([_vote("tina", "approve", NEW), _vote("tom", "approve", OLD)], quorum=3)
    row = InboxRow(chat_id="c", tenant="acme", agent="payAgent", ref="r1", tool="pay",
                   input=NEW, requested_at=NOW, approval=state.model_dump(mode="json"),
                   expires_at=NOW + timedelta(minutes=10))
    summary = held_summary(row, NOW)
    assert summary is not None
    assert (summary.tally, summary.votes, summary.time_left) == (
        "1 of 3 approvals", 2, "10 min left")
    assert held_summary(row.model_copy(update={"approval": None}), NOW) is None


def test_dev_mode_s_one_user_is_told_how_to_act_as_an_approver() -> None:
    """Plain dev mode: `dev` asked for every call, so four-eyes refuses it every vote."""
    call = _call(_state([])).model_copy(update={"requested_by": DEV_PRINCIPAL.id})
    reason = why_not_vote(DEV_PRINCIPAL, call, NOW)
    assert reason is not None and reason.startswith("Four-eyes: dev ")
    assert "--dev-principals alice,tina:treasury,tom:treasury" in reason
    named = Principal(id="alice", tenant="acme", roles=frozenset({"treasury"}))
    mine = why_not_vote(named, call.model_copy(update={"requested_by": "alice"}), NOW)
    assert mine is not None and "--dev-principals" not in mine  # a named user knows who asked


def _staged(votes: list[Vote], stage: int, applying: list[bool], **more: object) -> ApprovalState:
    stages = [{"name": "team lead", "roles": ["lead"]},
              {"name": "treasury", "roles": ["treasury"], "quorum": 2},
              {"name": "CFO", "roles": ["cfo"], "when": "over_100k"}]
    terms = ApprovalTerms.model_validate({"roles": ["lead"], "requested_by": "alice",
                                          "stages": stages, "stages_apply": applying})
    return ApprovalState(terms=terms, votes=votes, stage=stage, stage_at=NOW,
                         stages_apply=applying, **more)


def _staged_vote(actor: str, stage: int, **more: object) -> Vote:
    return Vote.model_validate({"actor": actor, "kind": "approve", "at": NOW, "stage": stage,
                                "input_sha256": sha256_hex(NEW), **more})


def test_a_staged_call_shows_each_stage_who_voted_in_it_and_where_it_waits() -> None:
    votes = [_staged_vote("lee", 0), _staged_vote("bob", 1, for_actor="tina",
                                                  delegation="0123456789abcdef")]
    view = policy_view(_call(_staged(votes, 1, [True, True, False])), NOW)
    assert view is not None
    assert (view.stage, view.tally, view.final) == ("stage 2 of 3: treasury",
                                                    "1 of 2 approvals", True)
    assert [(s.name, s.status, s.deciders, s.quorum) for s in view.stages] == [
        ("team lead", "approved", "role lead", 1), ("treasury", "waiting", "role treasury", 2),
        ("CFO", "skipped", "role cfo", 1)]
    [by_bob] = view.stages[1].votes
    assert (by_bob.actor, by_bob.for_actor, by_bob.short) == ("bob", "tina", "01234567")
    assert [(v.actor, v.stage, v.for_actor) for v in view.votes] == [
        ("lee", "team lead", None), ("bob", "treasury", "tina")]
    applying = policy_view(_call(_staged(votes, 1, [True, True, True])), NOW)
    assert applying is not None and not applying.final  # the CFO's stage comes after


def _statuses(call: ToolCall) -> list[str]:
    view = policy_view(call, NOW)
    assert view is not None
    return [s.status for s in view.stages]


def test_a_staged_call_ended_or_decided_says_where_it_stopped() -> None:
    state = _staged([_staged_vote("lee", 0)], 1, [True, True, True])
    expired = _call(state).model_copy(update={"status": "expired"})
    assert _statuses(expired) == ["approved", "ended", "not reached"]
    rejected = _call(state.model_copy(update={"outcome": "rejected"})).model_copy(
        update={"status": "rejected"})
    assert _statuses(rejected) == ["approved", "rejected", "not reached"]
    one_stage = policy_view(_call(_state([])), NOW)
    assert one_stage is not None and (one_stage.stages, one_stage.stage) == ((), None)


def test_an_inbox_row_of_a_staged_call_names_its_stage_and_that_stage_s_quorum() -> None:
    state = _staged([_staged_vote("lee", 0), _staged_vote("tina", 1)], 1, [True, True, False])
    raw = state.model_dump(mode="json")
    row = InboxRow(chat_id="c", tenant="acme", agent="wireAgent", ref="r1", tool="wire",
                   input=NEW, requested_at=NOW, approval=raw, stage=state.current_stage())
    summary = held_summary(row, NOW)
    assert summary is not None
    assert (summary.stage, summary.tally) == ("stage 2 of 3: treasury", "1 of 2 approvals")


def test_segregation_refusals_are_named_so() -> None:
    state = _staged([_staged_vote("bea", 0)], 1, [True, True, True])
    bea = Principal(id="bea", tenant="acme", roles=frozenset({"lead", "treasury"}))
    reason = why_not_vote(bea, _call(state), NOW)
    assert reason is not None and reason.startswith('Segregation: bea voted in stage "team lead"')
    delegated = why_not_vote(bea, _call(state), NOW, delegated=True)
    assert delegated is not None and delegated.endswith(
        "You (bea) may not vote yourself, only by a delegation to you (below).")
