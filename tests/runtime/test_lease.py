"""A running turn holds a lease its process renews: only an expired lease is retryable."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from interlock.bootstrap import build_service
from interlock.domain import Agent, FunctionModel, Interlock, RespondEntry, ToolContext, tool
from interlock.domain.errors import ForbiddenError, NothingToRetryError
from interlock.domain.runtime import turns
from tests.kit import Script, call, make_app, run, say

LEASE = timedelta(seconds=0.4)


class SlowInput(BaseModel):
    seconds: float


def _slow_agent(runs: list[str]) -> Agent:
    @tool(name="slow", description="Takes a while, with a side effect.", side_effects=True)
    async def slow(input: SlowInput, ctx: ToolContext) -> dict[str, Any]:
        runs.append(ctx.idempotency_key)
        await asyncio.sleep(input.seconds)
        return {"ok": True}

    script = Script([call(("slow", {"seconds": 1.2})), say("done")])
    return Agent(name="ops", system="", tools=[slow], model=FunctionModel(script))


def test_a_turn_whose_tool_outlives_the_lease_is_not_retried(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turns, "HEARTBEAT_SECONDS", 0.1)
    runs: list[str] = []
    app = build_service(store, [_slow_agent(runs)])
    chat = app.start_chat("ops", actor="alice")

    async def scenario() -> tuple[Any, BaseException | None]:
        sending = asyncio.create_task(app.send(chat.id, "go", actor="alice"))
        await asyncio.sleep(0.8)  # twice the lease, while the tool still runs
        try:
            await app.retry(chat.id, actor="alice", stale_after=LEASE)
            refused = None
        except NothingToRetryError as exc:
            refused = exc
        return await sending, refused

    try:
        result, refused = run(scenario())
        assert refused is not None, "a live turn was retried: its tool ran twice"
        assert result.finish_reason == "stop" and len(runs) == 1
        names = [type(e).__name__ for e in app.chat_events(chat.id)]
        assert "TurnHeartbeat" in names and "TurnRetried" not in names
    finally:
        app.close()


def test_an_expired_lease_is_retryable(store: str) -> None:
    app, _, _ = make_app(store, [say("done")])
    try:
        chat = app.start_chat("ops", actor="alice")
        crashed = app.get_chat(chat.id)
        crashed.send_message("deploy", actor="alice")
        crashed.record_model_reply(call(("deploy", {"env": "staging"})).message)
        app.commit(crashed)
        with pytest.raises(NothingToRetryError):
            run(app.retry(chat.id, actor="ops", stale_after=timedelta(minutes=2)))
        done = run(app.retry(chat.id, actor="ops", stale_after=timedelta(0)))
        assert done.finish_reason == "stop"
    finally:
        app.close()


def _failed_after_decision(app: Interlock) -> Any:
    chat = app.start_chat("ops", actor="alice")
    sent = run(app.send(chat.id, "go", actor="alice"))
    [interrupt] = sent.interrupts
    entry = RespondEntry(ref=interrupt.ref, name="approve", output={"approved": True})
    resumed = run(app.resume(chat.id, actor="bob", respond=[entry]))
    assert resumed.finish_reason == "failed"
    return chat


def test_an_approver_may_retry_only_a_turn_their_decision_started(store: str) -> None:
    app, _, _ = make_app(store, [call(("approve", {"action": "x"})), RuntimeError("down"),
                                 say("done")])
    try:
        chat = _failed_after_decision(app)
        with pytest.raises(ForbiddenError):
            run(app.retry(chat.id, actor="carol", decider_only=True))
        done = run(app.retry(chat.id, actor="bob", decider_only=True))
        assert done.finish_reason == "stop"
    finally:
        app.close()
