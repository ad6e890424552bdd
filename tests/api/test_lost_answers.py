"""A 503 can follow a commit: the store recorded the decision, then the answer was lost.
A retry with the same `Idempotency-Key` answers the first request's result, never a 409."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from interlock.bootstrap import build_service
from interlock.client import Client, TurnInProgressError
from interlock.client._errors import StoreUnavailableError
from interlock.domain import Interlock
from interlock.domain.errors import StoreUnavailableError as StoreDown
from interlock.domain.errors import TurnInProgressError as DomainTurnInProgressError
from interlock.domain.lost_answers import CutTurns
from tests.api.agents import AGENTS, GATES, Gate
from tests.api.conftest import ClientFor, Live


@pytest.fixture
def dana(client_for: ClientFor) -> Client:
    return client_for("dana")


@pytest.fixture
def lose_next_answer(live: Live, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The next commit succeeds, and then the store's answer is lost (the store guard's 503)."""
    real = live.service.commit
    armed: list[int] = []

    def commit(chat: Any) -> int | None:
        position = real(chat)
        if armed:
            armed.clear()
            raise StoreDown("the answer to a commit was lost")
        return position

    monkeypatch.setattr(live.service, "commit", commit)
    yield armed


def test_a_retry_after_a_lost_answer_gets_the_first_result(
    dana: Client, lose_next_answer: list[int]
) -> None:
    chat = dana.chat("bankingAgent")
    [approval] = chat.send("Transfer $500 to savings.").interrupts
    ok = approval.respond({"approved": True})
    lose_next_answer.append(1)
    with pytest.raises(StoreUnavailableError) as lost:
        chat.resume(respond=[ok], idempotency_key="k-lost")
    assert lost.value.status == 503
    again = chat.resume(respond=[ok], idempotency_key="k-lost")
    assert again.finish_reason == "stop" and "500" in again.text
    assert chat.resume(respond=[ok], idempotency_key="k-lost") == again
    done = [e for e in chat.events() if e["type"] in ("ToolCompleted", "Responded")]
    assert [e["type"] for e in done] == ["Responded", "ToolCompleted"]  # the transfer ran once


def test_another_process_waits_for_the_turns_lease(
    live: Live, dana: Client, lose_next_answer: list[int]
) -> None:
    """A process that did not see the cut cannot tell it from a turn still running
    elsewhere: 409 until the lease lapses (then it continues the turn)."""
    chat = dana.chat("bankingAgent")
    [approval] = chat.send("Transfer $500 to savings.").interrupts
    ok = approval.respond({"approved": True})
    lose_next_answer.append(1)
    with pytest.raises(StoreUnavailableError):
        chat.resume(respond=[ok], idempotency_key="k-elsewhere")
    live.service.cut_turns = CutTurns()  # the retry reaches a process that never saw it
    with pytest.raises(TurnInProgressError):
        chat.resume(respond=[ok], idempotency_key="k-elsewhere")


def test_a_start_whose_answer_was_lost_is_continued_under_its_key(
    live: Live, dana: Client, lose_next_answer: list[int]
) -> None:
    """A chat started with its message records itself at its first commit: a 503 after it
    leaves a chat the client was never told of. Sent again under its key, the start finds
    that chat and continues its turn; the payment runs once."""
    before = live.service.position()
    lose_next_answer.append(1)  # the turn's first commit lands, its answer is lost
    with pytest.raises(StoreUnavailableError):
        dana.start("payAgent", "pay 50 bob-corp", idempotency_key="k-start")
    chat, again = dana.start("payAgent", "pay 50 bob-corp", idempotency_key="k-start")
    assert again.finish_reason == "stop" and again.text == "outcome: {'paid': 50, 'to': 'bob-corp'}"
    paid = [e for e in chat.events() if e["type"] == "ToolCompleted"]
    assert len(paid) == 1  # the payment ran once
    assert dana.start("payAgent", "pay 50 bob-corp", idempotency_key="k-start")[1] == again
    chats = {n.originator_id for n in live.service.recorder.select_notifications(
        before, 100, inclusive_of_start=False)}
    assert [str(c) for c in chats] == [chat.id]  # one chat, not one a try


def test_a_cut_that_wrote_nothing_does_not_let_a_retry_run_another_process_s_turn(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start fails on the store in process A before anything is recorded; process B, sent
    the same start, records the chat and runs its tool. A's retry must not take B's turn
    up (its tool would run twice): the chat's last event is B's, and B's lease is fresh."""
    here, there = build_service(store, AGENTS), build_service(store, AGENTS)
    GATES["cut-1"] = gate = Gate()
    ran: list[object] = []
    try:
        real = here.commit

        def down(chat: Any) -> int | None:
            monkeypatch.setattr(here, "commit", real)
            raise StoreDown("the store is down")  # refused before anything was written

        monkeypatch.setattr(here, "commit", down)

        def start(app: Interlock) -> Any:
            return asyncio.run(app.open_chat("gateAgent", "hold-tool cut-1", actor="alice",
                                             tenant="acme", idempotency_key="k-cut"))

        with pytest.raises(StoreDown):
            start(here)
        elsewhere = threading.Thread(target=lambda: ran.append(start(there)))
        elsewhere.start()
        assert gate.entered.wait(10)  # B's turn is in the tool
        with pytest.raises(DomainTurnInProgressError):
            start(here)
        gate.release.set()
        elsewhere.join(10)
        [chat] = ran
        assert [e.name for e in chat.state.calls.values()] == ["hold"]
        tools = [e for e in here.events.get(chat.id) if type(e).__name__ == "ToolCompleted"]
        assert len(tools) == 1  # the tool ran once, in B
    finally:
        gate.release.set()
        here.close()
        there.close()
