"""A failure injected at every step of the turn loop ends the turn `failed`, never `running`.

Deliberate difference from Genkit, which has no durable chat: there an exception simply
propagates out of `generate` (js/ai/src/generate/action.ts). Interlock records the error on a
`TurnFinished(failed)` so the chat accepts a retry or a new message instead of answering
`turn_in_progress` forever.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from interlock.bootstrap import build_service
from interlock.domain import Chat, Interlock, StreamEvent
from interlock.domain.runtime.models import ChunkSink, ModelRequest, ModelResponse
from interlock.domain.runtime.turns import TurnLoop
from tests.kit import Message, Part, ToolRequest, make_app, run, say


class Injected(Exception):
    """The fault the test plants."""


def first_reply() -> ModelResponse:
    """Text plus a side-effect-free and a side-effect tool: every step of a round runs."""
    return ModelResponse(message=Message(role="model", content=[
        Part(text="working"),
        Part(tool_request=ToolRequest(name="lookup", input={"key": "a"})),
        Part(tool_request=ToolRequest(name="deploy", input={"env": "staging"})),
    ]))


def fail_once(fn: Callable[..., Any], when: Callable[..., bool] = lambda *a, **k: True
              ) -> Callable[..., Any]:
    """`fn`, except that its first call matching `when` raises Injected."""
    fired: list[bool] = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not fired and when(*args, **kwargs):
            fired.append(True)
            raise Injected(f"injected in {fn.__name__}")
        return fn(*args, **kwargs)

    return wrapper


class CrashingModel:
    """A model that is not a FunctionModel: its own exception, not a ModelError."""

    name = "crashing"

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None
                       ) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            raise Injected("injected in the model")
        result: ModelResponse = await self.inner.generate(request, on_chunk)
        return result


def plant_commit(app: Interlock, mp: pytest.MonkeyPatch, nth: int) -> None:
    calls: list[int] = []
    real = app.commit

    def commit(chat: Chat) -> int | None:
        calls.append(1)
        if len(calls) == nth:
            raise Injected(f"injected in commit {nth}")  # before anything is written
        return real(chat)

    mp.setattr(app, "commit", commit)


def plant(step: str, app: Interlock, mp: pytest.MonkeyPatch, emitted: list[str]) -> None:
    """Make `step` of the next turn raise once."""
    if step == "model":
        app.models["ops"] = CrashingModel(app.models["ops"])
    elif step == "model_reply":
        mp.setattr(Chat, "record_model_reply", fail_once(Chat.record_model_reply))
    elif step == "write_ahead_commit":
        plant_commit(app, mp, 1)
    elif step == "final_commit":
        plant_commit(app, mp, 2)
    elif step in ("text_chunk", "tool_request_emit", "tool_response_emit"):
        emitted.append(step)
    elif step == "tool_outcome":
        mp.setattr(Chat, "record_completed", fail_once(Chat.record_completed))
    elif step == "interrupt_outcome":
        mp.setattr(Chat, "record_interrupted", fail_once(Chat.record_interrupted))
    elif step == "finish":
        mp.setattr(Chat, "finish_turn", fail_once(Chat.finish_turn))
    elif step == "request":
        mp.setattr(TurnLoop, "_request", fail_once(TurnLoop._request))
    else:
        raise AssertionError(step)


STEPS = ["model", "request", "model_reply", "text_chunk", "write_ahead_commit",
         "tool_request_emit", "tool_outcome", "tool_response_emit", "interrupt_outcome",
         "finish", "final_commit"]
EMITS = {"text_chunk": "text", "tool_request_emit": "tool_request",
         "tool_response_emit": "tool_response"}


@pytest.mark.parametrize("step", STEPS)
def test_a_failure_at_any_step_ends_the_turn_failed_and_the_chat_recovers(
    store: str, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _, effects = make_app(store, [
        first_reply(),
        ModelResponse(message=Message(role="model", content=[
            Part(tool_request=ToolRequest(name="approve", input={"action": "ship"}))])),
        say("shipped"), say("again"), say("and again"),
    ])
    chat = app.start_chat("ops", actor="alice")
    planted: list[str] = []
    plant(step, app, monkeypatch, planted)
    fired: list[bool] = []

    async def emit(event: StreamEvent) -> None:
        if planted and event.type == EMITS[planted[0]] and not fired:
            fired.append(True)
            raise Injected(f"injected in emit {event.type}")

    result = run(app.send(chat.id, "go", actor="alice", emit=emit))
    stored = build_service(store).get_chat(chat.id)  # what another process would read
    assert result.finish_reason == "failed" and stored.status == "failed"
    assert "Injected: injected in" in (result.error or "") and stored.state.error == result.error

    monkeypatch.undo()  # the fault is gone; the chat must take a retry, then a new message
    retried = run(app.retry(chat.id, actor="alice"))
    if retried.finish_reason == "interrupted":
        [pending] = retried.interrupts
        from interlock.domain import RespondEntry

        retried = run(app.resume(chat.id, actor="bob", respond=[
            RespondEntry(ref=pending.ref, name="approve", output={"approved": True})]))
    assert retried.finish_reason == "stop"
    assert run(app.send(chat.id, "more", actor="alice")).finish_reason == "stop"
    assert app.get_chat(chat.id).status == "idle"
    # a deploy cut short before its outcome was recorded runs again, with the same key
    assert len({d["key"] for d in effects.deploys}) <= 1


def test_a_lost_race_is_not_recorded_as_a_failure(sqlite_store: str) -> None:
    """A concurrency conflict means another writer moved the chat on: the loser records
    nothing (not even `failed`) and the caller gets the conflict."""
    from interlock.domain.errors import ConcurrencyError

    app, _, _ = make_app(sqlite_store, [first_reply(), say("done")])
    chat = app.start_chat("ops", actor="alice")
    real = app.commit

    def racing(c: Chat) -> int | None:
        other = app.get_chat(c.id)
        other.send_message("sneaked in", actor="mallory")
        real(other)  # another process wins the next version
        return real(c)

    app.commit = racing  # type: ignore[method-assign]
    with pytest.raises(ConcurrencyError):
        run(app.send(chat.id, "go", actor="alice"))
    events = [type(e).__name__ for e in app.chat_events(chat.id)]
    assert "TurnFinished" not in events
