"""The inbox's `decidable` filter lists exactly what the domain would let each principal vote on."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from interlock import Agent, Approval, FunctionModel, ToolContext, tool
from interlock.bootstrap import build_service
from interlock.domain import ApproveEntry, Decider, Interlock
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.events import now
from interlock.domain.chat.rules import EditEntry, check_voter, held_call
from interlock.domain.errors import InterlockError
from interlock.projections import SqlReadModels
from interlock.projections.views.inbox import Decidable, InboxFilter, InboxView
from tests.kit import call, run, say


class Pay(BaseModel):
    amount: int


@tool(name="pay", approval=Approval(roles=["treasury"], groups=["finance"], quorum=3,
                                    expires_in=timedelta(hours=1)))
async def pay(input: Pay, ctx: ToolContext) -> dict[str, Any]:
    return {"paid": input.amount}


PEOPLE = [
    Decider("alice", frozenset({"treasury"})),  # sent the turn: the requester
    Decider("tom", frozenset({"treasury"})),
    Decider("gina", frozenset({"requester"}), frozenset({"finance"})),
    Decider("bob", frozenset({"approver"})),  # an approver, but not of this policy
    Decider("ada", frozenset({"admin"})),
    Decider("odd_one%", frozenset({"treasury"})),  # LIKE wildcards in an id are literal
]


@pytest.fixture
def app(store: str) -> Iterator[Interlock]:
    agent = Agent(name="payer", system="", tools=[pay], model=FunctionModel(
        lambda r: call(("pay", {"amount": 7}, "p1")) if r.messages[-1].role == "user"
        else say("done")))
    service = build_service(store, [agent])
    yield service
    service.close()


def _listed(views: SqlReadModels, who: Decider) -> bool:
    views.catch_up()
    f = InboxFilter(decidable_by=Decidable(id=who.id, roles=who.roles, groups=who.groups))
    listed = views.inbox(f).items
    assert views.inbox_count(f, 10) == len(listed)  # the console's count: the same filter
    return bool(listed)


def _allowed(app: Interlock, chat_id: Any, who: Decider) -> bool:
    """Whether the domain would take this principal's vote now (nothing is written)."""
    calls = app.get_chat(chat_id).state.calls
    seen = ApproveEntry(ref="p1", name="pay", input_sha256=sha256_hex(calls["p1"].input))
    try:
        check_voter(held_call(calls, seen, now(), who.id), who)
    except InterlockError:
        return False
    return True


def _agree(app: Interlock, views: SqlReadModels, chat_id: Any) -> set[str]:
    listed = {p.id for p in PEOPLE if _listed(views, p)}
    assert listed == {p.id for p in PEOPLE if _allowed(app, chat_id, p)}
    return listed


def test_decidable_agrees_with_the_domain_through_votes_and_an_edit(
    app: Interlock, views: SqlReadModels
) -> None:
    chat = app.start_chat("payer", actor="alice")
    run(app.send(chat.id, "pay", actor="alice"))
    assert _agree(app, views, chat.id) == {"tom", "gina", "ada", "odd_one%"}
    tom = PEOPLE[1]
    run(app.resume(chat.id, votes=[ApproveEntry(ref="p1", name="pay")], actor="tom", decider=tom))
    assert _agree(app, views, chat.id) == {"gina", "ada", "odd_one%"}
    gina = PEOPLE[2]
    run(app.resume(chat.id, votes=[EditEntry(ref="p1", name="pay", input={"amount": 5},
                                             reason="a smaller amount")],
                   actor="gina", decider=gina))
    # The editor now asks; tom's vote was on the old input, alice no longer asks.
    assert _agree(app, views, chat.id) == {"alice", "tom", "ada", "odd_one%"}


def test_votes_survive_a_rebuild_that_applies_them_in_one_batch(
    app: Interlock, views: SqlReadModels
) -> None:
    chat = app.start_chat("payer", actor="alice")
    run(app.send(chat.id, "pay", actor="alice"))
    views.catch_up()
    run(app.resume(chat.id, votes=[ApproveEntry(ref="p1", name="pay")], actor="tom",
                   decider=PEOPLE[1]))
    views.catch_up()  # live: the hold and the vote in two batches
    live = views.view(InboxView).dump()
    views.view(InboxView).reset()
    views.catch_up()  # rebuilt: the hold and the vote in one batch
    assert views.view(InboxView).dump() == live
    (row,) = views.inbox(InboxFilter()).items
    assert row.approval is not None and [v["actor"] for v in row.approval["votes"]] == ["tom"]
