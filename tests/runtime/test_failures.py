"""Failures: model errors, failing tools, max_turns, retries, write-ahead, idempotent resume."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

import pytest

from interlock.bootstrap import build_service
from interlock.domain import Agent, FunctionModel, Interlock, RespondEntry, ToolContext, tool
from interlock.domain.errors import IdempotencyKeyReusedError, NothingToRetryError
from tests.kit import LookupInput, Script, call, make_app, run, say


def types(app: Interlock, chat_id: object) -> list[str]:
    return [type(e).__name__ for e in app.chat_events(chat_id)]  # type: ignore[arg-type]


def test_model_error_fails_the_turn_and_retry_never_reruns_a_completed_tool(store: str) -> None:
    app, script, effects = make_app(
        store,
        [
            call(("lookup", {"key": "a"}), ("deploy", {"env": "staging"})),
            RuntimeError("provider down"),
            say("recovered"),
        ],
    )
    chat = app.start_chat("ops", actor="alice")
    failed = run(app.send(chat.id, "go", actor="alice"))
    assert failed.finish_reason == "failed" and "provider down" in (failed.error or "")
    assert app.get_chat(chat.id).status == "failed"
    assert types(app, chat.id)[-1] == "TurnFinished"

    done = run(app.retry(chat.id, actor="alice"))
    assert done.finish_reason == "stop" and done.text == "recovered"
    assert len(effects.deploys) == 1 and effects.lookups == ["a"]
    assert len(script.requests) == 3
    with pytest.raises(NothingToRetryError):
        run(app.retry(chat.id, actor="alice"))


def test_a_failing_tool_goes_back_to_the_model_and_keeps_other_interrupts(store: str) -> None:
    app, script, _ = make_app(
        store,
        [
            call(("boom", {"key": "k"}), ("approve", {"action": "x"})),
            say("noted"),
        ],
    )
    chat = app.start_chat("ops", actor="alice")
    sent = run(app.send(chat.id, "go", actor="alice"))
    assert [i.name for i in sent.interrupts] == ["approve"]
    [interrupt] = sent.interrupts
    run(
        app.resume(
            chat.id,
            actor="bob",
            respond=[RespondEntry(ref=interrupt.ref, name="approve", output={"approved": True})],
        )
    )
    tool_message = script.requests[-1].messages[-1]
    outputs = [p.tool_response.output for p in tool_message.content]  # type: ignore[union-attr]
    assert outputs == [{"error": "RuntimeError: boom k"}, {"approved": True, "note": None}]


def test_unknown_tool_and_bad_input_from_the_model_become_tool_errors(store: str) -> None:
    app, script, _ = make_app(
        store,
        [
            call(("teleport", {"to": "mars"}), ("lookup", {"wrong": 1})),
            say("sorry"),
        ],
    )
    chat = app.start_chat("ops", actor="alice")
    done = run(app.send(chat.id, "go", actor="alice"))
    assert done.finish_reason == "stop"
    responses = [p.tool_response for p in script.requests[-1].messages[-1].content]
    assert responses[0].output == {"error": "unknown tool 'teleport'"}  # type: ignore[union-attr]
    assert "invalid input for lookup" in responses[1].output["error"]  # type: ignore[union-attr]
    assert types(app, chat.id).count("ToolFailed") == 2


def test_max_turns_bounds_tool_rounds_and_the_model_sees_the_last_results(store: str) -> None:
    """Genkit's maxTurns (js/ai/src/generate/action.ts, `currentTurn + 1 > maxIterations`;
    go/ai/generate.go and py/.../_ai/_generate.py alike): at most N tool rounds, and the
    model is called once more with the last round's results. Deliberate difference: Genkit
    throws (ABORTED) when that reply asks for more tools; Interlock records the reply,
    answers its requests as not run (so the history stays well formed) and ends `max_turns`.
    """
    app, script, effects = make_app(
        store, [call(("lookup", {"key": str(i)})) for i in range(9)], max_turns=3
    )
    chat = app.start_chat("ops", actor="alice")
    result = run(app.send(chat.id, "loop", actor="alice"))
    assert result.finish_reason == "max_turns" and len(script.requests) == 4
    assert effects.lookups == ["0", "1", "2"]
    last_seen = script.requests[3].messages[-1]
    assert last_seen.role == "tool"
    assert last_seen.content[0].tool_response.output == {"value": "2"}  # type: ignore[union-attr]
    state = app.get_chat(chat.id).state
    assert state.status == "idle" and state.messages[-1].role == "tool"
    skipped = state.calls[state.batch[0]]
    assert skipped.status == "failed" and "max_turns (3 tool rounds)" in (skipped.error or "")
    assert run(app.send(chat.id, "again", actor="alice")).finish_reason == "max_turns"


def test_a_side_effect_tool_runs_only_after_its_request_is_committed(store: str) -> None:
    seen: dict[str, bool] = {}

    def committed(ctx: ToolContext) -> bool:
        reader = build_service(store)
        events = reader.chat_events(UUID(ctx.chat_id))
        reader.close()
        return any(
            type(e).__name__ == "ToolRequested" and e.ref == ctx.ref  # type: ignore[attr-defined]
            for e in events
        )

    @tool(name="charge")
    async def charge(input: LookupInput, ctx: ToolContext) -> dict[str, bool]:
        seen["charge"] = committed(ctx)
        return {"ok": True}

    @tool(name="peek", side_effects=False)
    async def peek(input: LookupInput, ctx: ToolContext) -> dict[str, bool]:
        seen["peek"] = committed(ctx)
        return {"ok": True}

    script = Script([call(("peek", {"key": "a"})), call(("charge", {"key": "b"})), say("done")])
    agent = Agent(name="pay", system="", tools=[charge, peek], model=FunctionModel(script))
    app = build_service(store, [agent])
    chat = app.start_chat("pay", actor="alice")
    assert run(app.send(chat.id, "pay", actor="alice")).finish_reason == "stop"
    assert seen == {"peek": False, "charge": True}


def test_resume_with_an_idempotency_key_answers_the_first_result(store: str) -> None:
    app, _, effects = make_app(
        store,
        [call(("approve", {"action": "x"})), call(("deploy", {"env": "staging"})), say("shipped")],
    )
    chat = app.start_chat("ops", actor="alice")
    [interrupt] = run(app.send(chat.id, "go", actor="alice")).interrupts
    entry = RespondEntry(ref=interrupt.ref, name="approve", output={"approved": True})
    first = run(app.resume(chat.id, actor="bob", respond=[entry], idempotency_key="k-1"))
    version = app.get_chat(chat.id).version
    again = run(app.resume(chat.id, actor="bob", respond=[entry], idempotency_key="k-1"))
    assert again.model_dump(exclude={"position"}) == first.model_dump(exclude={"position"})
    assert app.get_chat(chat.id).version == version and len(effects.deploys) == 1
    other = RespondEntry(ref=interrupt.ref, name="approve", output={"approved": False})
    with pytest.raises(IdempotencyKeyReusedError):
        run(app.resume(chat.id, actor="bob", respond=[other], idempotency_key="k-1"))


def test_a_turn_abandoned_by_a_crash_is_retried_with_the_same_idempotency_key(store: str) -> None:
    app, _, effects = make_app(store, [say("done")])
    chat = app.start_chat("ops", actor="alice")
    crashed = app.get_chat(chat.id)
    crashed.send_message("deploy", actor="alice")
    crashed.record_model_reply(call(("deploy", {"env": "staging"})).message)
    app.commit(crashed)  # the write-ahead commit, then the process died before the tool ran
    assert app.get_chat(chat.id).status == "running"
    with pytest.raises(NothingToRetryError):
        run(app.retry(chat.id, actor="ops"))  # not stale yet: maybe another process runs it

    done = run(app.retry(chat.id, actor="ops", stale_after=timedelta(0)))
    assert done.finish_reason == "stop"
    [ref] = app.get_chat(chat.id).state.calls
    assert [d["key"] for d in effects.deploys] == [f"{chat.id}:{ref}:1"]
