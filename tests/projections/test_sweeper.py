"""The sweeper: each due approval expires exactly once, across processes and restarts."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
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
from interlock.domain.chat.rules import AWAITS_AGENT
from interlock.domain.errors import InterlockError
from interlock.projections import SqlReadModels, open_views
from interlock.projections.views.inbox import InboxView
from interlock.sweeper import Sweeper
from tests.kit import call, run, say
from tests.projections.tamper import EventsTable

TTL = timedelta(milliseconds=300)


class Pay(BaseModel):
    amount: int


RAN: list[int] = []


@tool(name="pay", approval=Approval(roles=["treasury"], expires_in=TTL))
async def pay(input: Pay, ctx: ToolContext) -> dict[str, Any]:
    RAN.append(input.amount)
    return {"paid": input.amount}


@tool(name="escalating", approval=Approval(
    roles=["treasury"], expires_in=TTL, escalate_after=TTL / 3, escalate_to=["cfo"]))
async def escalating(input: Pay, ctx: ToolContext) -> dict[str, Any]:
    return {"paid": input.amount}


def _script(request: ModelRequest) -> ModelResponse:
    """Asks to pay on each user message, and says it was told of the outcome after."""
    return call(("pay", {"amount": 7}, "p1")) if request.messages[-1].role == "user" \
        else say("told")


def _agents() -> list[Agent]:
    return [Agent(name="payer", system="", tools=[pay], model=FunctionModel(_script))]


@pytest.fixture
def payer(store: str) -> Iterator[tuple[Interlock, SqlReadModels]]:
    """The payer agent's service and its views (caught up only when a test says so)."""
    app = build_service(store, _agents())
    views = open_views(app)
    yield app, views
    views.close()
    app.close()


def _held(app: Interlock, n: int) -> list[UUID]:
    ids = []
    for _ in range(n):
        chat = app.start_chat("payer", actor="alice")
        run(app.send(chat.id, "pay", actor="alice"))
        ids.append(chat.id)
    return ids


def _expiries(app: Interlock, chat_id: UUID) -> int:
    return sum(type(e).__name__ == "InterruptExpired" for e in app.chat_events(chat_id))


def sweep_in(store: str) -> None:
    """What a second process runs: its own service, views and sweeper on the same store."""
    app = build_service(store, _agents())
    views = open_views(app)
    views.catch_up()
    print(Sweeper(app, views).sweep())
    views.close()


def test_a_restart_expires_what_came_due_while_down_once_each(store: str) -> None:
    app = build_service(store, _agents())
    ids = _held(app, 5)
    app.close()  # the server is down while the deadlines pass
    time.sleep(TTL.total_seconds() + 0.1)
    again = build_service(store, _agents())
    views = open_views(again)
    try:
        views.catch_up()
        assert Sweeper(again, views).sweep() == 5
        views.catch_up()
        assert Sweeper(again, views).sweep() == 0
        assert [_expiries(again, c) for c in ids] == [1] * 5
        assert all(again.get_chat(c).state.finish_reason == "stop" for c in ids)
    finally:
        views.close()


def test_two_sweepers_in_two_processes_expire_each_once(store: str) -> None:
    app = build_service(store, _agents())
    ids = _held(app, 8)
    time.sleep(TTL.total_seconds() + 0.1)
    code = f"from tests.projections.test_sweeper import sweep_in; sweep_in({store!r})"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    written = [int(p.communicate(timeout=120)[0].split()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(written) == 8  # each expiry written by exactly one of them
    assert [_expiries(app, c) for c in ids] == [1] * 8


def test_chats_read_together_are_what_each_load_gives(store: str) -> None:
    app = build_service(store, _agents())
    ids = _held(app, 3)
    missing = UUID(int=7)
    together = app.get_chats([*ids, missing])
    assert sorted(together) == sorted(ids)  # no chat, no entry
    for chat_id in ids:
        alone = app.get_chat(chat_id)
        assert (together[chat_id].version, together[chat_id].state) == (alone.version, alone.state)


def test_a_chat_whose_log_is_refused_does_not_hold_up_the_others(
    store: str, payer: tuple[Interlock, SqlReadModels], caplog: pytest.LogCaptureFixture
) -> None:
    """One edited record is that chat's problem, said aloud: the rest of its page expires."""
    app, views = payer
    ids = _held(app, 4)
    views.catch_up()
    EventsTable(store, ids[1]).write_raw(2, b'{"not": "an event"}')
    assert sorted(app.get_chats(ids)) == sorted(ids[:1] + ids[2:])
    time.sleep(TTL.total_seconds() + 0.1)
    assert Sweeper(app, views).sweep() == 3
    assert [_expiries(app, c) for c in ids[:1] + ids[2:]] == [1] * 3
    assert f"sweeper cannot expire {ids[1]} p1" in caplog.text


def test_a_recorded_expiry_is_not_looked_at_again_while_the_inbox_lags(
    payer: tuple[Interlock, SqlReadModels], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, views = payer
    ids = _held(app, 3)
    views.catch_up()
    time.sleep(TTL.total_seconds() + 0.1)
    looked: list[UUID] = []
    expire_due = app.expire_due

    async def counted(chat_id: UUID, ref: str, chat: Any = None, *,
                      at: datetime | None = None) -> str:
        looked.append(chat_id)
        return await expire_due(chat_id, ref, chat, at=at)

    monkeypatch.setattr(app, "expire_due", counted)
    sweeper = Sweeper(app, views)
    assert sweeper.sweep() == 3 and sorted(looked) == sorted(ids)
    assert sweeper.sweep() == 0 and len(looked) == 3  # the inbox still lists them
    views.catch_up()
    assert sweeper.sweep() == 0 and len(looked) == 3  # now it does not
    assert [_expiries(app, c) for c in ids] == [1] * 3


def test_an_escalated_call_expires_at_its_deadline_while_the_inbox_lags(store: str) -> None:
    """What the sweeper recorded (an escalation) does not hide the call's later expiry.

    The sweeps are given their clock: slept for, the first one, when late (a busy machine),
    found both deadlines passed and expired the call at once."""
    agent = Agent(name="escalator", system="", tools=[escalating], model=FunctionModel(
        lambda r: call(("escalating", {"amount": 3}, "e1")) if r.messages[-1].role == "user"
        else say("told")))
    app = build_service(store, [agent])
    views = open_views(app)
    try:
        chat = app.start_chat("escalator", actor="alice")
        run(app.send(chat.id, "pay", actor="alice"))
        views.catch_up()
        asked = app.get_chat(chat.id).state.calls["e1"].requested_at
        sweeper = Sweeper(app, views)
        assert sweeper.sweep(now=asked + TTL / 2) == 1  # escalated; the inbox does not see it
        assert _expiries(app, chat.id) == 0
        assert sweeper.sweep(now=asked + TTL * 2) >= 1 and _expiries(app, chat.id) == 1
    finally:
        views.close()


def _vote_at(app: Interlock, chat_id: UUID, deadline: float, outcome: list[str]) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))
    try:
        run(app.resume(chat_id, votes=[ApproveEntry(ref="p1", name="pay")], actor="tom",
                       decider=Decider("tom", frozenset({"treasury"}))))
        outcome.append("approved")
    except InterlockError as exc:
        outcome.append(exc.code)


def test_an_approval_racing_its_expiry_has_one_outcome(
    payer: tuple[Interlock, SqlReadModels]
) -> None:
    app, views = payer
    for _ in range(3):
        (chat_id,) = _held(app, 1)
        views.catch_up()
        ran_before, outcome = len(RAN), []
        deadline = time.monotonic() + TTL.total_seconds()
        voter = threading.Thread(target=_vote_at, args=(app, chat_id, deadline, outcome))
        voter.start()
        time.sleep(max(0.0, deadline - time.monotonic()))
        Sweeper(app, views).sweep()
        voter.join()
        expired = _expiries(app, chat_id)
        assert expired + outcome.count("approved") == 1, outcome
        assert len(RAN) - ran_before == outcome.count("approved")  # at most one run
        assert expired == 0 or outcome == ["interrupt_expired"]


def _told_of_expiry(app: Interlock, chat_id: UUID) -> bool:
    """The model answered after seeing the expiry as the tool's response."""
    state = app.get_chat(chat_id).state
    outputs = [p.tool_response.output for m in state.messages for p in m.content
               if p.tool_response is not None]
    return state.finish_reason == "stop" and outputs == [{"expired": True, "at": ANY_TIME}]


class _AnyTime:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and "T" in other


ANY_TIME = _AnyTime()


def test_a_sweeper_without_agents_records_and_the_server_continues_the_turn(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = build_service(store, _agents())
    (chat_id,) = _held(server, 1)
    later = datetime.now(UTC) + timedelta(hours=1)
    monkeypatch.setattr(service_module, "now", lambda: later)
    runner = build_service(store)  # `interlock projections run`: views and sweeper, no agents
    runner_views, server_views = open_views(runner), open_views(server)
    try:
        runner_views.catch_up()
        assert Sweeper(runner, runner_views).sweep(later) == 1
        chat = server.get_chat(chat_id).state
        assert (chat.status, chat.error, _expiries(server, chat_id)) == ("failed", AWAITS_AGENT, 1)
        server_views.catch_up()
        assert Sweeper(server, server_views).sweep(later) == 1  # continued, not expired again
        assert _told_of_expiry(server, chat_id) and _expiries(server, chat_id) == 1
        server_views.catch_up()
        assert Sweeper(server, server_views).sweep(later) == 0  # nothing left to go on with
    finally:
        runner_views.close()
        server_views.close()
        runner.close()
        server.close()


def test_without_a_server_a_clients_retry_continues_the_turn(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = build_service(store, _agents())
    (chat_id,) = _held(app, 1)
    later = datetime.now(UTC) + timedelta(hours=1)
    monkeypatch.setattr(service_module, "now", lambda: later)
    runner = build_service(store)
    views = open_views(runner)
    try:
        views.catch_up()
        assert Sweeper(runner, views).sweep(later) == 1
        run(app.retry(chat_id, actor="alice"))
        assert _told_of_expiry(app, chat_id)
        views.catch_up()
        assert views.view(InboxView).awaiting(["payer"], 10) == []
    finally:
        views.close()
        runner.close()
        app.close()
