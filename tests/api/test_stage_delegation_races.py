"""Races of staged approval and delegation, on SQLite and PostgreSQL (issue 42):

- two stages' votes at once: of leads and treasurers all voting together, exactly one vote
  counts per stage, in stage order, and a refused vote writes nothing;
- a delegation revoked while its delegate votes: the vote lands before the revocation, or
  it is refused; never a vote counted under a revoked delegation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from interlock.client import ForbiddenError, InterlockAPIError
from interlock.domain import Decider
from interlock.domain.delegations import (
    DelegationDesk,
    DelegationRequest,
    DelegationRevoked,
    DelegationUsed,
    delegations_id,
)
from interlock.domain.storage.repository import ChatRepository
from tests.api.agents import PAID
from tests.api.conftest import ClientFor, Live
from tests.api.test_approvals import _away, _held, _vote_by, _wire

ROUNDS = 4


def _at_once(calls: dict[str, Callable[[], Any]]) -> dict[str, str]:
    """Run the calls together (a barrier), each outcome "ok" or its error's code."""
    start = threading.Barrier(len(calls))
    outcomes: dict[str, str] = {}

    def run(name: str, call: Callable[[], Any]) -> None:
        start.wait()
        try:
            call()
            outcomes[name] = "ok"
        except InterlockAPIError as exc:
            outcomes[name] = exc.code

    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def _votes(client_for: ClientFor, chat_id: str) -> list[dict[str, Any]]:
    return [e for e in client_for("root").open_chat(chat_id).events()
            if e["type"] == "ApprovalVoted"]


def test_two_stages_votes_at_once_count_one_per_stage(live: Live, client_for: ClientFor) -> None:
    """Two leads and two treasurers approve a two-stage wire at the same moment."""
    for _ in range(ROUNDS):
        _stage_round(client_for)


def _stage_round(client_for: ClientFor) -> None:
    chat, held = _wire(client_for, 5000)  # the team lead, then treasury (no CFO)
    version = chat.state()["version"]
    outcomes = _at_once({who: (lambda who=who: client_for(who).open_chat(chat.id).decide(
        held.approve())) for who in ("lee", "bea", "tina", "tom")})
    assert set(outcomes.values()) <= {"ok", "forbidden", "concurrent_modification",
                                      "already_voted", "interrupt_not_pending",
                                      "turn_in_progress"}, outcomes
    votes = _votes(client_for, chat.id)
    stages = [v["data"]["stage"] for v in votes]
    assert stages in ([], [0], [0, 1]), stages  # one per stage, in order
    assert sorted(v["actor"] for v in votes) == sorted(
        w for w, o in outcomes.items() if o == "ok")  # a refused vote wrote nothing
    assert {v["actor"] for v in votes if v["data"]["stage"] == 0} <= {"lee", "bea"}
    assert len({v["actor"] for v in votes}) == len(votes)  # nobody in two stages
    paid = [p for p in PAID if p["chat"] == chat.id]
    assert len(paid) == (1 if stages == [0, 1] else 0)
    if stages != [0, 1]:  # nothing half-way: the call still waits where its votes say
        stage = client_for("carol").open_chat(chat.id).state()["interrupts"][0]["stage"]
        assert stage["index"] == len(stages)
    assert chat.state()["version"] > version or not votes


def _delegation_events(live: Live, tenant: str = "acme") -> list[Any]:
    return live.service.store.stream(delegations_id(tenant))


def test_a_delegated_vote_and_its_revocation_at_once_never_count_the_vote_after_it(
    live: Live, client_for: ClientFor
) -> None:
    for _ in range(ROUNDS):
        _revoke_round(live, client_for)


def _revoke_round(live: Live, client_for: ClientFor) -> None:
    made = _away(client_for, "tina", "dana", roles=["treasury"])
    chat, held = _held(client_for)  # pay: two treasurers
    outcomes = _at_once({
        "vote": lambda: _vote_by(client_for, "dana", chat.id, held, made["id"]),
        "revoke": lambda: client_for("tina").request(
            "DELETE", f"/v1/delegations/{made['id']}")})
    assert outcomes["revoke"] == "ok"  # a revocation is never lost to the vote
    assert outcomes["vote"] in ("ok", "forbidden"), outcomes
    votes = _votes(client_for, chat.id)
    stream = [e for e in _delegation_events(live)
              if getattr(e, "delegation_id", None) == UUID(made["id"])]
    kinds = [type(e).__name__ for e in stream]
    if outcomes["vote"] == "ok":
        [vote] = votes
        assert (vote["data"]["for_actor"], vote["data"]["delegation_id"]) == (
            "tina", made["id"])
        # its fence is in the stream, before the revocation
        assert kinds == ["DelegationGranted", "DelegationUsed", "DelegationRevoked"]
    else:
        assert votes == [] and kinds == ["DelegationGranted", "DelegationRevoked"]


def test_a_revocation_committed_between_the_votes_check_and_its_write_refuses_the_vote(
    live: Live, client_for: ClientFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic: the revocation commits right after the vote's fence read the stream
    (the delegation then in force), before the vote's write: the write conflicts, and the
    vote is refused as the delegation is no longer in force; the chat has no vote."""
    made = _away(client_for, "tina", "dana", roles=["treasury"])
    chat, held = _held(client_for)
    read = ChatRepository.stream
    fired: list[bool] = []

    def stream_then_revoke(self: ChatRepository, stream_id: UUID) -> list[Any]:
        events = read(self, stream_id)
        if not fired:
            fired.append(True)
            DelegationDesk(live.service).revoke("acme", UUID(made["id"]),
                                                Decider("tina", frozenset({"treasury"})))
        return events

    monkeypatch.setattr(ChatRepository, "stream", stream_then_revoke)
    version = chat.state()["version"]
    with pytest.raises(ForbiddenError) as refused:
        _vote_by(client_for, "dana", chat.id, held, made["id"])
    assert fired and refused.value.details["reason"] == "delegation_inactive"
    assert chat.state()["version"] == version and _votes(client_for, chat.id) == []
    kinds = [type(e) for e in _delegation_events(live)
             if getattr(e, "delegation_id", None) == UUID(made["id"])]
    assert DelegationUsed not in kinds and kinds[-1] is DelegationRevoked
    monkeypatch.undo()
    tina = client_for("tina").open_chat(chat.id).decide(held.approve())  # her own vote counts
    assert tina.finish_reason == "interrupted"


def test_another_change_of_the_delegations_stream_before_the_votes_write_costs_no_409(
    live: Live, client_for: ClientFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic: another delegation is granted right after the vote's fence read the
    stream, so the fence's version is taken: the chat did not move and the delegation is
    still in force, so the vote is asked again and lands (it was a 409 before)."""
    made = _away(client_for, "tina", "dana", roles=["treasury"])
    chat, held = _held(client_for)
    read = ChatRepository.stream
    fired: list[bool] = []

    def stream_then_grant(self: ChatRepository, stream_id: UUID) -> list[Any]:
        events = read(self, stream_id)
        if not fired:
            fired.append(True)
            now = datetime.now(UTC)
            DelegationDesk(live.service).grant("acme", Decider("tom", frozenset({"treasury"})),
                                               DelegationRequest(delegate="carol", starts_at=now,
                                                                 ends_at=now + timedelta(days=1),
                                                                 reason="away"))
        return events

    monkeypatch.setattr(ChatRepository, "stream", stream_then_grant)
    turn = _vote_by(client_for, "dana", chat.id, held, made["id"])
    assert fired and turn["finish_reason"] == "interrupted"  # one of two treasurers
    [vote] = _votes(client_for, chat.id)
    assert (vote["data"]["for_actor"], vote["data"]["delegation_id"]) == ("tina", made["id"])
    kinds = [type(e).__name__ for e in _delegation_events(live)]
    assert kinds == ["DelegationGranted", "DelegationGranted", "DelegationUsed"]
