"""Racing resumes of one interrupt: exactly one wins, the side effect runs once."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import pytest

from interlock.bootstrap import build_service
from interlock.domain import Interlock, ModelRequest, ModelResponse, RespondEntry
from interlock.domain.errors import ConcurrencyError, InterlockError
from tests.kit import call, make_app, run, say


def racing_steps(barrier: Any) -> list[Any]:
    """After the resume, both racers reach the model before either can commit."""

    def wait_then_deploy(_: ModelRequest) -> ModelResponse:
        barrier.wait(timeout=10)
        return call(("deploy", {"env": "staging"}))

    return [wait_then_deploy, say("deployed")]


def interrupted_chat(store: str) -> tuple[Any, str]:
    app, _, _ = make_app(store, [call(("approve", {"action": "deploy"}))])
    chat = app.start_chat("ops", actor="alice")
    [interrupt] = run(app.send(chat.id, "deploy please", actor="alice")).interrupts
    return chat.id, interrupt.ref


def resume_once(store: str, chat_id: Any, ref: str, barrier: Any) -> tuple[str, int]:
    app, _, effects = make_app(store, racing_steps(barrier))
    try:
        run(
            app.resume(
                chat_id,
                actor="bob",
                respond=[RespondEntry(ref=ref, name="approve", output={"approved": True})],
            )
        )
    except InterlockError as exc:
        return exc.code, len(effects.deploys)
    finally:
        app.close()
    return "ok", len(effects.deploys)


def deploys_recorded(app: Interlock, chat_id: Any) -> int:
    return sum(1 for e in app.chat_events(chat_id) if type(e).__name__ == "ToolCompleted")


def test_two_threads_racing_one_wins(store: str) -> None:
    chat_id, ref = interrupted_chat(store)
    barrier = threading.Barrier(2)
    outcomes: list[tuple[str, int]] = []
    threads = [
        threading.Thread(target=lambda: outcomes.append(resume_once(store, chat_id, ref, barrier)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(code for code, _ in outcomes) == ["concurrent_modification", "ok"]
    assert sum(n for _, n in outcomes) == 1
    app = build_service(store)
    assert deploys_recorded(app, chat_id) == 1
    assert app.get_chat(chat_id).status == "idle"


def _process_racer(store: str, chat_id: Any, ref: str, barrier: Any, results: Any) -> None:
    results.put(resume_once(store, chat_id, ref, barrier))


def test_two_processes_racing_on_postgres(pg_store: str) -> None:
    chat_id, ref = interrupted_chat(pg_store)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    racers = [
        ctx.Process(target=_process_racer, args=(pg_store, chat_id, ref, barrier, results))
        for _ in range(2)
    ]
    for p in racers:
        p.start()
    outcomes = [results.get(timeout=60) for _ in racers]
    for p in racers:
        p.join(timeout=30)
    assert sorted(code for code, _ in outcomes) == ["concurrent_modification", "ok"]
    assert sum(n for _, n in outcomes) == 1
    assert deploys_recorded(build_service(pg_store), chat_id) == 1


def test_loser_gets_a_typed_conflict(sqlite_store: str) -> None:
    chat_id, ref = interrupted_chat(sqlite_store)
    first, _, _ = make_app(sqlite_store, [call(("deploy", {"env": "staging"})), say("ok")])
    second, _, _ = make_app(sqlite_store, [call(("deploy", {"env": "staging"})), say("ok")])
    stale = second.get_chat(chat_id)
    run(
        first.resume(
            chat_id,
            actor="bob",
            respond=[RespondEntry(ref=ref, name="approve", output={"approved": True})],
        )
    )
    stale.resume(
        [RespondEntry(ref=ref, name="approve", output={"approved": True})],
        [],
        actor="carol",
        tools=second.agent("ops").tool_map,
    )
    with pytest.raises(ConcurrencyError):
        second.commit(stale)
