"""Delegation, pure: a tenant's Delegations stream and the Chat aggregate's rules for a vote
cast "for X, by delegation D". No store, no service."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from interlock.domain import ApproveEntry, Chat, Decider, Message, Part, ToolRequest
from interlock.domain.chat.approval_events import ApprovalVoted
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.policies import Approval
from interlock.domain.chat.rules import barred_voters
from interlock.domain.delegations import (
    DelegationGranted,
    DelegationRequest,
    DelegationRevoked,
    Delegations,
    replay,
)
from interlock.domain.errors import (
    AlreadyVotedError,
    DelegationNotFoundError,
    ForbiddenError,
    InvalidRequestError,
    StageSegregationError,
)
from tests.domain.test_approval_stages import BANK, SMALL, TOOLS

NOW = datetime.now(UTC)
AWAY = (NOW - timedelta(hours=1), NOW + timedelta(days=7))  # away from A to B
TINA = Decider("tina", frozenset({"treasury", "lead"}), frozenset({"finance"}))
DAN = Decider("dan", frozenset({"requester"}))


def ask(delegate: str = "dan", *, roles: list[str] | None = None,
        window: tuple[datetime, datetime] = AWAY) -> DelegationRequest:
    return DelegationRequest(delegate=delegate, starts_at=window[0], ends_at=window[1],
                             roles=roles, reason="on leave")


def test_a_delegation_is_recorded_revocable_and_replayed_as_recorded() -> None:
    book = Delegations("acme")
    granted = book.grant(TINA, ask(roles=["treasury"]), NOW)
    assert (granted.delegator, granted.delegate, granted.roles, granted.groups) == (
        "tina", "dan", ["treasury"], ["finance"])
    revoked = book.revoke(granted.id, TINA)
    assert revoked.revoked_by == "tina" and not revoked.active(NOW)
    events = book.seal(lambda prev, e: "sealed")
    assert [type(e) for e in events] == [DelegationGranted, DelegationRevoked]
    assert replay("acme", events).granted == book.granted
    assert replay("globex", events).granted == {}


def test_a_delegation_lends_no_more_than_its_delegator_holds() -> None:
    book = Delegations("acme")
    with pytest.raises(ForbiddenError) as wider:
        book.grant(TINA, ask(roles=["treasury", "cfo"]), NOW)
    assert wider.value.details["reason"] == "wider_than_own"
    assert wider.value.details["roles"] == ["cfo"]
    root = Decider("root", frozenset({"admin", "treasury"}))
    assert book.grant(root, ask(), NOW).roles == ["treasury"]  # an admin's power is not lent
    with pytest.raises(InvalidRequestError):
        book.grant(TINA, ask("Tina"), NOW)  # to oneself
    with pytest.raises(InvalidRequestError):
        book.grant(TINA, ask(window=(NOW, NOW - timedelta(days=1))), NOW)
    assert len(book.pending_events) == 1


def test_only_the_delegate_acts_under_it_and_only_while_it_is_in_force() -> None:
    book = Delegations("acme")
    d = book.grant(TINA, ask(roles=["treasury"]), NOW)
    acting = book.acting(d.id, DAN, NOW)
    assert (acting.id, acting.acting_for, acting.roles, acting.holds) == (
        "dan", "tina", frozenset({"treasury"}), frozenset({"requester"}))
    with pytest.raises(ForbiddenError) as other:
        book.acting(d.id, Decider("eve", frozenset({"treasury"})), NOW)
    assert other.value.details["reason"] == "not_the_delegate"
    for at in (AWAY[0] - timedelta(seconds=1), AWAY[1]):
        with pytest.raises(ForbiddenError) as out:
            book.acting(d.id, DAN, at)
        assert out.value.details["reason"] == "delegation_inactive"
    with pytest.raises(ForbiddenError):
        book.revoke(d.id, DAN)  # only its delegator or an admin
    book.revoke(d.id, Decider("root", frozenset({"admin"})))
    with pytest.raises(ForbiddenError):
        book.acting(d.id, DAN, NOW)
    with pytest.raises(DelegationNotFoundError):
        book.acting(book.id, DAN, NOW)  # no delegation has that id


def held(policy: Approval, requester: str = "alice") -> Chat:
    chat = Chat.start("bank", actor=requester, tenant="acme")
    chat.send_message("pay acme", actor=requester)
    request = ToolRequest(ref="p1", name="pay", input=SMALL)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    chat.hold_for_approval("p1", policy.terms(NOW, requester))
    chat.finish_turn("interrupted")
    chat.collect_events()
    return chat


def vote(chat: Chat, decider: Decider) -> list[Any]:
    entry = ApproveEntry(ref="p1", name="pay", input_sha256=sha256_hex(SMALL))
    chat.resume([], [], actor=decider.id, tools=TOOLS, votes=[entry], decider=decider, now=NOW)
    return chat.collect_events()


def dan_for(delegator: Decider, **scope: Any) -> Decider:
    book = Delegations("acme")
    return book.acting(book.grant(delegator, ask(**scope), NOW).id, DAN, NOW)


def test_a_delegates_vote_is_recorded_for_the_delegator_by_the_delegation() -> None:
    chat = held(Approval(roles=["treasury"], quorum=2))
    acting = dan_for(TINA)
    [voted] = vote(chat, acting)
    assert isinstance(voted, ApprovalVoted)
    assert (voted.actor, voted.for_actor, voted.delegation_id) == ("dan", "tina",
                                                                     acting.delegation)
    # it is tina's vote: she may not vote again herself, nor dan again for her or himself
    with pytest.raises(AlreadyVotedError):
        vote(chat, TINA)
    with pytest.raises(AlreadyVotedError):
        vote(chat, Decider("dan", frozenset({"treasury"})))
    approval = chat.state.calls["p1"].approval
    assert approval is not None and {"dan", "tina"} <= barred_voters(approval, "alice")
    [done] = vote(chat, Decider("tom", frozenset({"treasury"})))
    assert done.outcome == "approved"  # tina (by dan) and tom: a quorum of two people


def test_a_delegation_never_lets_anyone_approve_their_own_request() -> None:
    chat = held(Approval(roles=["treasury"]), requester="dan")  # dan asked for it
    with pytest.raises(ForbiddenError) as own:
        vote(chat, dan_for(TINA))
    assert own.value.details["reason"] == "requester"
    chat = held(Approval(roles=["treasury"]), requester="tina")  # tina asked; dan votes for her
    with pytest.raises(ForbiddenError) as theirs:
        vote(chat, dan_for(TINA))
    assert theirs.value.details == {"ref": "p1", "actor": "dan", "reason": "requester",
                                    "for_actor": "tina"}


def test_a_delegate_holds_the_delegated_scope_only() -> None:
    chat = held(Approval(roles=["lead"]))
    with pytest.raises(ForbiddenError) as narrow:
        vote(chat, dan_for(TINA, roles=["treasury"]))
    assert narrow.value.details["reason"] == "not_a_decider"


def test_segregation_and_conflicts_count_the_delegate_and_whom_they_vote_for() -> None:
    chat = Chat.start("bank", actor="alice", tenant="acme")
    chat.send_message("pay", actor="alice")
    request = ToolRequest(ref="p1", name="pay", input=SMALL)
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=request)]))
    chat.hold_for_approval("p1", BANK.terms(NOW, "alice", [True, True, False]))
    chat.finish_turn("interrupted")
    chat.collect_events()
    vote(chat, Decider("dan", frozenset({"lead"})))  # dan approves the lead's stage himself
    with pytest.raises(StageSegregationError):
        vote(chat, dan_for(TINA, roles=["treasury"]))  # and may not do treasury's for tina
    trader = Decider("dan", frozenset({"trader"}))
    book = Delegations("acme")
    acting = book.acting(book.grant(TINA, ask(roles=["treasury"]), NOW).id, trader, NOW)
    policy = Approval(roles=["treasury"], conflicts=[("trader", "treasury")])
    with pytest.raises(ForbiddenError) as toxic:
        vote(held(policy), acting)
    assert toxic.value.details["reason"] == "conflicting_roles"
