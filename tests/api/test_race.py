"""Two `interlock serve` processes on one PostgreSQL; 20 clients resume one interrupt at once."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from interlock.client import Chat, Client, ConflictError, Respond, TurnResult
from tests.api.conftest import KEYS
from tests.api.server import ServeProcess

CLIENTS = 20


@pytest.fixture
def servers(pg_store: str, tmp_path: Path) -> Iterator[list[ServeProcess]]:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(KEYS))
    keys.chmod(0o600)
    args = ("--store", pg_store, "--agents", "tests.api.agents:AGENTS", "--keys", str(keys))
    started: list[ServeProcess] = []
    try:
        started.extend(ServeProcess(*args) for _ in range(2))
        yield started
    finally:
        for server in started:
            server.stop()


def _waiting_chat(server: ServeProcess) -> tuple[Client, Chat, Respond]:
    requester = Client(server.url, api_key="key-alice")
    chat = requester.chat("bankingAgent")
    [approval] = chat.send("Transfer $100 to savings.").interrupts
    return requester, chat, approval.respond({"approved": True})


def _race(servers: list[ServeProcess], chat_id: str, call: Callable[[Chat], TurnResult]
          ) -> list[TurnResult | ConflictError]:
    """Every client loads its handle first, then all resume together."""
    start = threading.Barrier(CLIENTS)
    clients = [Client(servers[i % 2].url, api_key="key-bob") for i in range(CLIENTS)]
    handles = [c.open_chat(chat_id) for c in clients]

    def one(handle: Chat) -> TurnResult | ConflictError:
        start.wait()
        try:
            return call(handle)
        except ConflictError as exc:
            return exc

    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            return list(pool.map(one, handles))
    finally:
        for c in clients:
            c.close()


def _effects(chat: Chat) -> dict[str, int]:
    events = chat.events()
    transfers = {e["data"]["ref"] for e in events
                 if e["type"] == "ToolRequested" and e["data"]["name"] == "transferMoney"}
    return {
        "decisions": sum(e["type"] in ("Responded", "Restarted") for e in events),
        "transfers": sum(e["type"] == "ToolCompleted" and e["data"]["ref"] in transfers
                         for e in events),
    }


def _split(outcomes: list[Any]) -> tuple[list[TurnResult], list[ConflictError]]:
    return ([o for o in outcomes if isinstance(o, TurnResult)],
            [o for o in outcomes if isinstance(o, ConflictError)])


def test_one_decision_one_side_effect_nineteen_conflicts(servers: list[ServeProcess]) -> None:
    requester, chat, approve = _waiting_chat(servers[0])
    outcomes = _race(servers, chat.id, lambda h: h.resume(respond=[approve]))

    won, lost = _split(outcomes)
    assert len(won) == 1 and won[0].finish_reason == "stop"
    assert len(lost) == CLIENTS - 1
    assert {e.code for e in lost} <= {"concurrent_modification", "interrupt_not_pending",
                                      "turn_in_progress"}
    assert {e.status for e in lost} == {409}
    assert _effects(chat) == {"decisions": 1, "transfers": 1}
    requester.close()


def test_an_idempotency_key_answers_retries_with_the_first_result(
    servers: list[ServeProcess],
) -> None:
    requester, chat, approve = _waiting_chat(servers[1])
    outcomes = _race(servers, chat.id,
                     lambda h: h.resume(respond=[approve], idempotency_key="approve-once"))

    won, lost = _split(outcomes)
    assert len(won) + len(lost) == CLIENTS
    first = won[0]
    assert all(w == first for w in won)
    assert {e.code for e in lost} <= {"concurrent_modification", "turn_in_progress"}
    with Client(servers[0].url, api_key="key-bob") as retrier:
        again = retrier.open_chat(chat.id)
        for _ in lost:
            assert again.resume(respond=[approve], idempotency_key="approve-once") == first
    assert _effects(chat) == {"decisions": 1, "transfers": 1}
    requester.close()
