"""A vote, an expiry and a withdrawal each cost the event store exactly one commit."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel

from interlock import Agent, Approval, FunctionModel, ToolContext, tool
from interlock.bootstrap import build_service
from interlock.domain import ApproveEntry, Decider, Interlock, ModelRequest, ModelResponse
from interlock.domain import application as service_module
from interlock.domain.chat.rules import RejectEntry
from interlock.projections import SqlReadModels
from interlock.sweeper import Sweeper
from tests.kit import call, run, say
from tests.projections.commits import counting

TOM = Decider("tom", frozenset({"treasury"}))


class Pay(BaseModel):
    amount: int


@tool(name="pay", approval=Approval(roles=["treasury"], quorum=2, expires_in=timedelta(hours=1)))
async def pay(input: Pay, ctx: ToolContext) -> dict[str, Any]:
    return {"paid": input.amount}


def _script(request: ModelRequest) -> ModelResponse:
    return call(("pay", {"amount": 7}, "p1")) if request.messages[-1].role == "user" \
        else say("told")


@pytest.fixture
def app(store: str) -> Iterator[Interlock]:
    service = build_service(store, [Agent(name="payer", system="", tools=[pay],
                                          model=FunctionModel(_script))])
    yield service
    service.close()


def _held(app: Interlock) -> UUID:
    chat = app.start_chat("payer", actor="alice")
    run(app.send(chat.id, "pay", actor="alice"))
    return chat.id


def _types(app: Interlock, chat_id: UUID) -> list[str]:
    return [type(e).__name__ for e in app.chat_events(chat_id)]


def test_a_vote_that_resolves_nothing_is_one_commit(app: Interlock) -> None:
    chat_id = _held(app)
    with counting(app) as seen:
        result = run(app.resume(chat_id, votes=[ApproveEntry(ref="p1", name="pay")],
                                actor="tom", decider=TOM))
    assert (seen.commits, result.finish_reason) == (1, "interrupted")
    assert _types(app, chat_id)[-1] == "ApprovalVoted"


def test_a_rejection_and_the_models_answer_are_one_commit(app: Interlock) -> None:
    chat_id = _held(app)
    with counting(app) as seen:
        result = run(app.resume(chat_id, votes=[RejectEntry(ref="p1", name="pay", reason="no")],
                                actor="tom", decider=TOM))
    assert (seen.commits, result.finish_reason, result.text) == (1, "stop", "told")


def test_a_withdrawal_is_one_commit(app: Interlock) -> None:
    chat_id = _held(app)
    with counting(app) as seen:
        result = run(app.withdraw(chat_id, ["p1"], reason="changed my mind",
                                  decider=Decider("alice")))
    assert (seen.commits, result.finish_reason) == (1, "stop")
    assert _types(app, chat_id).count("InterruptWithdrawn") == 1


def test_an_expiry_by_the_sweeper_is_one_commit(
    app: Interlock, views: SqlReadModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat_id = _held(app)
    later = datetime.now(UTC) + timedelta(hours=2)
    monkeypatch.setattr(service_module, "now", lambda: later)
    views.catch_up()
    with counting(app) as seen:
        assert Sweeper(app, views).sweep(later) == 1
    assert seen.commits == 1
    assert _types(app, chat_id).count("InterruptExpired") == 1
    assert app.get_chat(chat_id).state.finish_reason == "stop"  # the model saw the expiry
