"""A call is held by the data policy in force when it is asked, though a process keeps the
tenant's policy book between holds (domain/services/policy_books.py): another process's
approval since the book was read refuses the commit that would record the hold, nothing of
it is written, and the call is judged again by the version now in force."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel

from interlock.bootstrap import build_service
from interlock.domain import Agent, FunctionModel, ModelRequest, ModelResponse, ToolContext, tool
from interlock.domain.application import Interlock
from interlock.domain.chat.events import ToolCompleted, ToolRequested
from interlock.domain.chat.policies import Decider
from interlock.domain.chat.rules import ApproveEntry
from interlock.domain.errors import ConcurrencyError, ModelError, PolicyMovedError
from interlock.domain.policy_book import PolicyDesk, PolicyDocument, PolicyProposal
from interlock.domain.runtime import turns as runtime_turns
from interlock.domain.services import turns as turn_service
from interlock.domain.services.policy_books import PolicyBooks
from tests.api.agents import AGENTS, PAID, _ask, _say, pay, pay_script

PIA = Decider("pia", frozenset({"policy_admin"}))
RAY = Decider("ray", frozenset({"policy_admin"}))


def _in_force(app: Interlock, document: dict[str, Any]) -> int:
    """A version of `pay-limits` proposed by pia and approved by ray, in force now."""
    desk = PolicyDesk(app)
    made = desk.propose("acme", PIA, PolicyProposal(
        id="pay-limits", agent="payAgent", tool="pay", reason="limits",
        document=PolicyDocument.model_validate(document)))
    desk.approve("acme", "pay-limits", made.version, RAY, "reviewed")
    return made.version


def _pay(app: Interlock, amount: int, agent: str = "payAgent") -> tuple[Any, Any]:
    chat = app.start_chat(agent, actor="alice", tenant="acme")
    return chat.id, asyncio.run(app.send(chat.id, f"pay {amount} bob-corp", actor="alice",
                                         tenant="acme"))


def paid(chat_id: UUID) -> list[dict[str, object]]:
    """The payments a chat's tool made (the tool is handed the chat's id as text)."""
    return [p for p in PAID if p["chat"] == str(chat_id)]


class Note(BaseModel):
    text: str


NOTED: list[str] = []
ELSEWHERE: list[Interlock] = []  # the other process, whose approval the note tool makes


@tool(name="note", description="Records a note; meanwhile another process changes policies.")
async def note(input: Note, ctx: ToolContext) -> dict[str, object]:
    NOTED.append(ctx.chat_id)
    _in_force(ELSEWHERE[0], {"roles": ["lead"]})  # v2: a lead decides every payment
    return {"noted": input.text}


def _note_then_pay(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "user":
        return _ask(("note", {"text": "paying"}))
    part = last.content[0].tool_response
    if part is not None and part.name == "note":
        return _ask(("pay", {"amount": 500, "to": "bob-corp"}))
    return _say("done")


STEPS = Agent(name="payAgent", system="Notes, then pays.", tools=[note, pay],
              model=FunctionModel(_note_then_pay, name="note-then-pay"))


@contextmanager
def _v1_kept_here(store: str, agents: list[Agent] = AGENTS, warm: str = "payAgent",
                  ) -> Iterator[tuple[Interlock, Interlock]]:
    """Two processes on one store: `there` puts v1 in force (payments under a million run),
    and `here` runs a turn of `warm` under it (a payment keeps the book); `there` is the
    note tool's other process."""
    here, there = build_service(store, agents), build_service(store, agents)
    ELSEWHERE[:] = [there]
    try:
        _in_force(there, {"when": {"path": "amount", "op": ">", "value": 1_000_000}})
        assert _pay(here, 500, agent=warm)[1].finish_reason == "stop"
        yield here, there
    finally:
        ELSEWHERE.clear()
        here.close()
        there.close()


def test_a_hold_judged_by_a_book_another_process_moved_is_judged_again(store: str) -> None:
    with _v1_kept_here(store) as (here, there):  # v1: 500 runs; `here` may keep this book
        # another process puts v2 in force: a lead decides every payment
        assert _in_force(there, {"roles": ["lead"]}) == 2
        chat_id, held = _pay(here, 500)
        assert held.finish_reason == "interrupted"
        [call] = held.interrupts
        assert call.approval is not None
        terms = call.approval["terms"]
        assert (terms["policy"]["id"], terms["policy"]["version"], terms["roles"]) == (
            "pay-limits", 2, ["lead"])
        assert paid(chat_id) == []  # the stale book ran nothing
        events = list(here.events.get(chat_id))
        assert sum(isinstance(e, ToolRequested) for e in events) == 1  # asked once, recorded once
        assert [e.originator_version for e in events] == list(range(1, len(events) + 1))


def test_this_process_s_own_approval_is_heard_at_once(store: str) -> None:
    app = build_service(store, AGENTS)
    try:
        _in_force(app, {"when": {"path": "amount", "op": ">", "value": 1_000_000}})
        assert _pay(app, 500)[1].finish_reason == "stop"
        _in_force(app, {"roles": ["lead"]})
        turn = _pay(app, 500)[1]
        assert turn.finish_reason == "interrupted"
        assert turn.interrupts[0].approval["terms"]["policy"]["version"] == 2
    finally:
        app.close()


def test_a_later_round_judged_by_a_moved_book_goes_on_from_its_last_commit(store: str) -> None:
    """Round 1's tool acted and committed; the policies change during it; round 2's payment,
    judged by the kept book, is refused at commit and judged again, and round 1's tool does
    not run again."""
    with _v1_kept_here(store, [a for a in AGENTS if a.name != "payAgent"] + [STEPS],
                       warm="opsAgent") as (here, _):
        chat_id, turn = _pay(here, 500)
        assert turn.finish_reason == "interrupted"
        assert turn.interrupts[0].approval["terms"]["policy"]["version"] == 2
        assert paid(chat_id) == []
        assert NOTED.count(str(chat_id)) == 1  # what acted ran once
        events = list(here.events.get(chat_id))
        assert sum(isinstance(e, ToolCompleted) for e in events) == 1
        assert [e.originator_version for e in events] == list(range(1, len(events) + 1))


def test_a_hold_refused_at_every_commit_is_the_client_s_409_and_writes_nothing(
    pg_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As if another process changed the policies between every hold and its commit (on
    PostgreSQL, the store whose appends take guards: the others read them at every hold)."""
    with _v1_kept_here(pg_store) as (here, there):
        _always_the_stale_book(here, there, monkeypatch)
        chat = here.start_chat("payAgent", actor="alice", tenant="acme")
        with pytest.raises(PolicyMovedError):
            asyncio.run(here.send(chat.id, "pay 500 bob-corp", actor="alice", tenant="acme"))
        assert [e.originator_version for e in here.events.get(chat.id)] == [1]  # started only
        assert paid(chat.id) == []


def _always_the_stale_book(here: Interlock, there: Interlock,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`there` puts v2 in force, and `here` holds by its kept v1 at every try."""
    stale = here.turns._books.kept("acme")
    assert stale is not None
    _in_force(there, {"roles": ["lead"]})
    monkeypatch.setattr(PolicyBooks, "kept", lambda self, tenant: stale)


def _notified_since(app: Interlock, position: int) -> list[tuple[UUID, str]]:
    """The chat and topic of every event recorded after `position`."""
    return [(n.originator_id, n.topic) for n in app.recorder.select_notifications(
        position, 1000, inclusive_of_start=False)]


def _opened_and_held_by_v2(app: Interlock) -> Any:
    """A chat opened with a payment of 500: held by version 2 in force, nothing paid."""
    chat = asyncio.run(app.open_chat("payAgent", "pay 500 bob-corp", actor="alice",
                                     tenant="acme"))
    assert chat.state.finish_reason == "interrupted"
    [call] = chat.pending_interrupts()
    assert call.approval is not None and call.approval.terms.policy is not None
    assert call.approval.terms.policy.version == 2
    assert paid(chat.id) == []
    return chat


def test_a_chat_opened_whose_hold_a_moved_book_judged_is_opened_anew(store: str) -> None:
    """The first commit of a chat opened with its message records the chat: refused by the
    hold's guard, nothing of it is written, and it is opened again under the book in force."""
    with _v1_kept_here(store) as (here, there):
        _in_force(there, {"roles": ["lead"]})
        before = here.position()
        chat = _opened_and_held_by_v2(here)
        # the refused attempt left no chat: every event since is the opened chat's
        assert {chat_id for chat_id, _ in _notified_since(here, before)} == {chat.id}
        events = list(here.events.get(chat.id))
        assert [e.originator_version for e in events] == list(range(1, len(events) + 1))


def test_a_chat_opened_whose_later_round_a_moved_book_judged_goes_on(store: str) -> None:
    with _v1_kept_here(store, [a for a in AGENTS if a.name != "payAgent"] + [STEPS],
                       warm="opsAgent") as (here, _):
        chat = _opened_and_held_by_v2(here)
        assert NOTED.count(str(chat.id)) == 1  # what acted ran once
        events = list(here.events.get(chat.id))
        assert sum(isinstance(e, ToolCompleted) for e in events) == 1
        assert [e.originator_version for e in events] == list(range(1, len(events) + 1))


def test_a_chat_opened_whose_hold_is_refused_at_every_commit_leaves_nothing(
    pg_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _v1_kept_here(pg_store) as (here, there):
        _always_the_stale_book(here, there, monkeypatch)
        before = here.position()
        with pytest.raises(PolicyMovedError) as refused:
            asyncio.run(here.open_chat("payAgent", "pay 500 bob-corp", actor="alice",
                                       tenant="acme"))
        assert _notified_since(here, before) == []
        # no chat to name: the client sends the start again, not a message to a chat
        assert "chat_id" not in refused.value.details
        assert "no chat was recorded" in refused.value.message


MOVED_BY_ANOTHER: list[UUID] = []  # the chat another process writes while the model answers


def _moved_then_pay(request: ModelRequest) -> ModelResponse:
    if MOVED_BY_ANOTHER:  # another request writes the chat while this one asks the model
        chat = ELSEWHERE[0].get_chat(MOVED_BY_ANOTHER.pop())
        chat.record_fingerprint("another-version")
        ELSEWHERE[0].commit(chat)
    return pay_script(request)


RACED = Agent(name="payAgent", system="Pays.", tools=[pay],
              model=FunctionModel(_moved_then_pay, name="moved-then-pay"))


def test_a_policy_change_and_a_racing_write_at_once_is_the_race_s_409(
    pg_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit is refused by both the guard and the chat's own version: another request
    drives the chat now, so this one is refused as a racing write, never continued."""
    with _v1_kept_here(pg_store, [a for a in AGENTS if a.name != "payAgent"] + [RACED]) as (
            here, there):
        stale = here.turns._books.kept("acme")
        assert stale is not None
        _in_force(there, {"roles": ["lead"]})
        monkeypatch.setattr(here.turns._books, "kept", lambda tenant: stale)
        chat = here.start_chat("payAgent", actor="alice", tenant="acme")
        MOVED_BY_ANOTHER.append(chat.id)
        try:
            with pytest.raises(ConcurrencyError) as lost:
                asyncio.run(here.send(chat.id, "pay 500 bob-corp", actor="alice",
                                      tenant="acme"))
        finally:
            MOVED_BY_ANOTHER.clear()
        assert not isinstance(lost.value, PolicyMovedError)
        assert [type(e).__name__ for e in here.events.get(chat.id)] == [
            "ChatStarted", "AgentFingerprinted"]  # the other request's write alone
        assert paid(chat.id) == []


@tool(name="look", description="Reads an account; takes a while, acts on nothing.",
      side_effects=False)
async def look(input: Note, ctx: ToolContext) -> dict[str, object]:
    await asyncio.sleep(0.3)
    return {"seen": input.text}


def _look_then_pay(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "user":
        return _ask(("look", {"text": "bob-corp"}))
    part = last.content[0].tool_response
    if part is not None and part.name == "look":
        return _ask(("pay", {"amount": 500, "to": "bob-corp"}))
    return _say("done")


LOOKS = Agent(name="payAgent", system="Looks, then pays.", tools=[look, pay],
              model=FunctionModel(_look_then_pay, name="look-then-pay"))


def test_a_heartbeat_refused_by_the_guard_ends_the_attempt_and_leaves_no_gap(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool that acts on nothing runs without a commit before it, so the hold's guard rides
    the first heartbeat: refused there, the attempt ends (its events never written), and the
    send is asked again under the version now in force."""
    with _v1_kept_here(store, [a for a in AGENTS if a.name != "payAgent"] + [LOOKS]) as (
            here, there):
        _in_force(there, {"roles": ["lead"]})
        monkeypatch.setattr(runtime_turns, "HEARTBEAT_SECONDS", 0.05)
        chat_id, turn = _pay(here, 500)
        assert turn.finish_reason == "interrupted"
        assert turn.interrupts[0].approval["terms"]["policy"]["version"] == 2
        assert paid(chat_id) == []
        events = list(here.events.get(chat_id))
        assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
        assert sum(isinstance(e, ToolCompleted) for e in events) == 1  # the look, recorded once


FAILS_ONCE: list[bool] = []  # the model's next call fails (a provider's outage)


def _fails_then_pays(request: ModelRequest) -> ModelResponse:
    if FAILS_ONCE:
        FAILS_ONCE.pop()
        raise ModelError("the provider is down")
    return pay_script(request)


RETRIED = Agent(name="payAgent", system="Pays.", tools=[pay],
                model=FunctionModel(_fails_then_pays, name="fails-then-pays"))


def test_a_retry_whose_hold_a_moved_book_judged_is_judged_again(pg_store: str) -> None:
    """Retry, like send and resume: its commit refused by the guard, nothing of it written,
    it runs again and the payment is held by the version in force (PostgreSQL: the store
    whose appends take guards; the others read the policies at every hold)."""
    agents = [a for a in AGENTS if a.name != "payAgent"] + [RETRIED]
    here, there = build_service(pg_store, agents), build_service(pg_store, agents)
    try:
        _in_force(there, {"when": {"path": "amount", "op": ">", "value": 1_000_000}})
        _pay(here, 1)  # `here` keeps v1
        FAILS_ONCE.append(True)
        chat_id, failed = _pay(here, 500)
        assert failed.finish_reason == "failed"
        _in_force(there, {"roles": ["lead"]})  # v2, in another process
        turn = asyncio.run(here.retry(chat_id, actor="alice", tenant="acme"))
        assert turn.finish_reason == "interrupted"
        assert turn.interrupts[0].approval["terms"]["policy"]["version"] == 2
        assert paid(chat_id) == []
        events = list(here.events.get(chat_id))
        assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
    finally:
        FAILS_ONCE.clear()
        here.close()
        there.close()


def _withdrawn_then_pays_less(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "user":
        return _ask(("pay", {"amount": 5000, "to": "bob-corp"}))
    part = last.content[0].tool_response
    if part is not None and part.name == "pay" and "paid" not in str(part.output):
        return _ask(("pay", {"amount": 500, "to": "bob-corp"}))  # withdrawn: ask for less
    return _say("done")


WITHDRAWN = Agent(name="payAgent", system="Pays.", tools=[pay],
                  model=FunctionModel(_withdrawn_then_pays_less, name="withdrawn-then-less"))


def test_a_withdrawal_whose_next_hold_a_moved_book_judged_is_judged_again(
    pg_store: str,
) -> None:
    """The model, told of the withdrawal, asks for a smaller payment: judged by the book this
    process kept, its commit is refused, and the withdrawal runs again under the version in
    force, instead of a 409 for a policy change the withdrawer never saw."""
    agents = [a for a in AGENTS if a.name != "payAgent"] + [WITHDRAWN]
    here, there = build_service(pg_store, agents), build_service(pg_store, agents)
    try:
        _in_force(there, {"when": {"path": "amount", "op": ">", "value": 1000}})
        chat_id, held = _pay(here, 0)  # v1 holds the 5000 the model asks; `here` keeps v1
        assert held.finish_reason == "interrupted"
        _in_force(there, {"roles": ["lead"]})  # v2: a lead decides every payment
        turn = asyncio.run(here.withdraw(chat_id, [held.interrupts[0].ref],
                                         reason="wrong amount", decider=Decider("alice"),
                                         tenant="acme"))
        assert turn.finish_reason == "interrupted"
        [again] = turn.interrupts
        assert (again.input["amount"], again.approval["terms"]["policy"]["version"]) == (500, 2)
        assert paid(chat_id) == []
        events = list(here.events.get(chat_id))
        assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
    finally:
        here.close()
        there.close()


def _expired_then_note_then_pay(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "user":
        return _ask(("pay", {"amount": 5000, "to": "bob-corp"}))
    part = last.content[0].tool_response
    if part is not None and part.name == "pay" and "paid" not in str(part.output):
        return _ask(("note", {"text": "expired: paying less"}))
    if part is not None and part.name == "note":
        return _ask(("pay", {"amount": 500, "to": "bob-corp"}))
    return _say("done")


EXPIRES = Agent(name="payAgent", system="Pays.", tools=[note, pay],
                model=FunctionModel(_expired_then_note_then_pay, name="expired-note-pay"))


def test_an_expiry_whose_turn_acted_before_a_moved_book_refused_it_goes_on(
    pg_store: str,
) -> None:
    """The sweeper's expiry continues the turn: the note acts and is recorded (and meanwhile
    another process puts v2 in force); the next payment, judged by the kept v1, is refused
    at commit. The turn goes on from the note instead of being left running, and the
    payment is held by v2; the note does not run again."""
    agents = [a for a in AGENTS if a.name != "payAgent"] + [EXPIRES]
    here, there = build_service(pg_store, agents), build_service(pg_store, agents)
    ELSEWHERE[:] = [there]
    try:
        _in_force(there, {"when": {"path": "amount", "op": ">", "value": 1000},
                          "expires_in": 60})
        chat_id, held = _pay(here, 0)  # v1 holds the 5000; `here` keeps v1
        assert held.finish_reason == "interrupted"
        later = datetime.now(UTC) + timedelta(hours=1)  # past its 60 s
        done = asyncio.run(here.expire_due(chat_id, held.interrupts[0].ref, at=later))
        assert done == "expired"
        chat = here.get_chat(chat_id)
        assert chat.status == "interrupted"
        [again] = chat.pending_interrupts()
        assert (again.input["amount"], again.approval.terms.policy.version) == (500, 2)
        assert NOTED.count(str(chat_id)) == 1
        assert paid(chat_id) == []
        events = list(here.events.get(chat_id))
        assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
    finally:
        ELSEWHERE.clear()
        here.close()
        there.close()


def test_a_vote_on_a_call_held_under_a_kept_version_reads_no_policies(
    pg_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorded version never changes: a vote is judged by the kept book's copy of the
    version its call was held under, without reading the tenant's policy stream again."""
    app = build_service(pg_store, AGENTS)
    try:
        _in_force(app, {"roles": ["lead"]})
        chat_id, held = _pay(app, 500)
        [call] = held.interrupts
        reads: list[object] = []
        real = turn_service.load_policies
        monkeypatch.setattr(turn_service, "load_policies",
                            lambda *args: reads.append(args) or real(*args))
        entry = ApproveEntry(ref=call.ref, name="pay", input_sha256=call.input_sha256)
        done = asyncio.run(app.resume(chat_id, votes=[entry], actor="lee", tenant="acme",
                                      decider=Decider("lee", frozenset({"lead"}))))
        assert done.finish_reason == "stop"
        assert [p["amount"] for p in paid(chat_id)] == [500]
        assert reads == []
    finally:
        app.close()


class Account(BaseModel):
    account: str


@tool(name="peek", description="Reads an account's balance.", side_effects=False)
async def peek(input: Account, ctx: ToolContext) -> dict[str, object]:
    return {"balance": 1234, "account": input.account}


SEEN: list[str] = []  # the tool outputs the model was sent


def _peek_then_say(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    part = last.content[0].tool_response if last.role == "tool" else None
    if part is None:
        return _ask(("peek", {"account": "acme-main"}))
    SEEN.append(str(part.output))
    return _say("looked")


PEEKS = Agent(name="payAgent", system="Reads balances.", tools=[peek],
              model=FunctionModel(_peek_then_say, name="peek-then-say"))


@pytest.mark.parametrize("streamed", [False, True])
def test_a_read_only_tool_s_output_never_goes_out_under_a_moved_book(
    pg_store: str, streamed: bool,
) -> None:
    """A round of read-only tools commits nothing before they run, so no append checks the
    kept book's guard before their output would go to the stream or the model: it is
    checked then (a read), and a book another process moved sends nothing out: the call is
    judged again and held by the version in force (a stream, which showed the request
    already, is refused: the client sends again)."""
    agents = [a for a in AGENTS if a.name != "payAgent"] + [PEEKS]
    here, there = build_service(pg_store, agents), build_service(pg_store, agents)
    desk = PolicyDesk(there)
    try:
        for version, document in enumerate((
                {"when": {"path": "account", "op": "==", "value": "nobody"}},
                {"roles": ["lead"]}), start=1):
            if version == 2:
                assert _pay(here, 0)[1].finish_reason == "stop"  # `here` keeps v1
                SEEN.clear()
            made = desk.propose("acme", PIA, PolicyProposal(
                id="peeks", agent="payAgent", tool="peek", reason="reads",
                document=PolicyDocument.model_validate(document)))
            desk.approve("acme", "peeks", made.version, RAY, "reviewed")
        if streamed:
            shown: list[str] = []

            async def show(event: object) -> None:
                shown.append(str(event))

            chat = here.start_chat("payAgent", actor="alice", tenant="acme")
            with pytest.raises(PolicyMovedError):
                asyncio.run(here.send(chat.id, "pay 0 x", actor="alice", tenant="acme",
                                      emit=show))
            assert shown and not any("1234" in line for line in shown)
            assert [e.originator_version for e in here.events.get(chat.id)] == [1]
        else:
            chat_id, turn = _pay(here, 0)
            assert turn.finish_reason == "interrupted"
            assert turn.interrupts[0].approval["terms"]["policy"]["version"] == 2
            events = list(here.events.get(chat_id))
            assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
        assert SEEN == []  # the balance was never sent to the model
    finally:
        SEEN.clear()
        here.close()
        there.close()
