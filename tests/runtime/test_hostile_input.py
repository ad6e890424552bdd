"""Values the log could not hold faithfully are refused before anything is written."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.bootstrap import build_service
from interlock.domain import (
    Agent,
    FunctionModel,
    RespondEntry,
    RestartEntry,
    ToolContext,
    tool,
)
from interlock.domain.errors import InvalidRequestError
from tests.kit import LookupInput, Script, call, make_app, run, say


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def test_a_chat_with_unrecordable_metadata_is_never_started(store: str) -> None:
    app, _, _ = make_app(store, [])
    for bad in (nested(250), {"x": float("inf")}, {"k": "\ud800"}):
        with pytest.raises(InvalidRequestError):
            app.start_chat("ops", actor="alice", metadata=bad)
    assert app.recorder.max_notification_id() in (None, 0)


@pytest.mark.parametrize(
    "entry",
    [
        RespondEntry(ref="R", name="approve", output={"approved": True}, metadata=nested(250)),
        RespondEntry(ref="R", name="approve", output={"approved": True, "note": "\ud800"}),
        RestartEntry(ref="R", name="approve", replace_input={"action": float("nan")}),
        RespondEntry(ref="\ud800", name="approve", output={}),
    ],
)
def test_an_unrecordable_resume_is_refused_and_writes_nothing(store: str, entry: Any) -> None:
    app, _, _ = make_app(store, [call(("approve", {"action": "x"}, "R"))])
    chat = app.start_chat("ops", actor="alice")
    run(app.send(chat.id, "go", actor="alice"))
    before = app.get_chat(chat.id).version
    kind = "respond" if isinstance(entry, RespondEntry) else "restart"
    with pytest.raises(InvalidRequestError):
        run(app.resume(chat.id, actor="bob", **{kind: [entry]}))
    assert app.get_chat(chat.id).version == before
    assert app.get_chat(chat.id).pending_interrupts()[0].ref == "R"


def test_an_unrecordable_model_reply_fails_the_turn_and_keeps_completed_tools(store: str) -> None:
    app, _, effects = make_app(
        store,
        [
            call(("deploy", {"env": "staging"})),
            call(("lookup", nested(250))),
            say("recovered"),
        ],
    )
    chat = app.start_chat("ops", actor="alice")
    failed = run(app.send(chat.id, "go", actor="alice"))
    assert failed.finish_reason == "failed" and "nested deeper" in (failed.error or "")
    assert app.get_chat(chat.id).state.calls["deploy-1"].status == "completed"
    assert run(app.retry(chat.id, actor="alice")).text == "recovered"
    assert len(effects.deploys) == 1


def test_tool_outputs_that_are_not_json_fail_the_call(store: str) -> None:
    @tool(name="weird", side_effects=False)
    async def weird(input: LookupInput, ctx: ToolContext) -> Any:
        return {"object": object()} if input.key == "object" else {"n": float("nan")}

    script = Script([call(("weird", {"key": "object"}), ("weird", {"key": "nan"})), say("ok")])
    app = build_service(
        store, [Agent(name="w", system="", tools=[weird], model=FunctionModel(script))]
    )
    chat = app.start_chat("w", actor="alice")
    assert run(app.send(chat.id, "go", actor="alice")).finish_reason == "stop"
    outputs = [p.tool_response.output for p in script.requests[-1].messages[-1].content]  # type: ignore[union-attr]
    assert all(set(o) == {"error"} for o in outputs)
    assert "NaN" in outputs[1]["error"]


def test_a_version_past_the_end_is_refused(store: str) -> None:
    app, _, _ = make_app(store, [])
    chat = app.start_chat("ops", actor="alice")
    with pytest.raises(InvalidRequestError) as caught:
        app.get_chat(chat.id, version=99)
    assert caught.value.details == {"version": 99, "latest": 1}
