"""Parallel tool calls, malformed arguments and unknown tools, on each provider."""

from __future__ import annotations

import json

import pytest

from interlock.domain import RestartEntry
from interlock.domain.chat.events import ToolFailed, ToolRequested
from interlock.examples.banking import LEDGER, banking
from interlock.providers.wire import INVALID_JSON
from tests.providers.conftest import Wire, make_model
from tests.providers.fake_openai import FakeOpenAI
from tests.providers.fakes import Call, Reply
from tests.providers.helpers import Collected, events_of

pytestmark = pytest.mark.anyio

SMALL = Call("call_small", "transferMoney", '{"amount": 25, "to_account": "savings"}')
LARGE = Call("call_large", "transferMoney", '{"amount": 2500, "to_account": "bob"}')
BROKEN_ARGS = '{"amount": 50, "to_account": "sav'


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_parallel_calls_keep_their_ids_and_come_back_in_request_order(
    wire: Wire, stream: bool
) -> None:
    app, seen = wire.app(), Collected()
    chat = app.start_chat(banking.name, actor="alice")
    before = LEDGER.transfers
    wire.fake.queue(Reply(text="Two transfers coming up.", calls=(SMALL, LARGE)))

    paused = await app.send(chat.id, "transfer $25 to savings and $2500 to bob", actor="alice",
                            emit=seen if stream else None)

    assert paused.finish_reason == "interrupted"
    assert [(i.ref, i.metadata) for i in paused.interrupts] == [
        ("call_large", {"reason": "over_limit", "limit": 1000.0})]
    wire.fake.queue(Reply(text="Both transfers are done."))
    done = await app.resume(chat.id, restart=[RestartEntry(
        ref="call_large", name="transferMoney", resumed_metadata={"override": True})],
        actor="bob")

    assert (done.finish_reason, done.text) == ("stop", "Both transfers are done.")
    assert LEDGER.transfers == before + 2
    assert [c[0] for c in wire.fake.tool_calls()] == ["call_small", "call_large"]
    results = wire.fake.tool_results()
    assert [ref for ref, _ in results] == ["call_small", "call_large"]
    assert [json.loads(text)["status"] for _, text in results] == ["done", "done"]


async def _malformed_turn(wire: Wire, stream: bool) -> None:
    fake = wire.fake
    app = wire.app()
    chat = app.start_chat(banking.name, actor="alice")
    before = LEDGER.transfers
    fake.queue(Reply(calls=(Call("call_bad", "transferMoney", BROKEN_ARGS),)),
               Reply(text="Sorry, I sent a broken request."))

    result = await app.send(chat.id, "transfer $50 to savings", actor="alice",
                            emit=Collected() if stream else None)

    assert (result.finish_reason, result.text) == ("stop", "Sorry, I sent a broken request.")
    requested = events_of(app, chat.id, ToolRequested)
    assert [(e.ref, e.input) for e in requested] == [("call_bad", {INVALID_JSON: BROKEN_ARGS})]
    failed = events_of(app, chat.id, ToolFailed)
    assert [e.ref for e in failed] == ["call_bad"]
    assert failed[0].error.startswith("invalid input for transferMoney")
    [(ref, text)] = fake.tool_results()
    assert ref == "call_bad" and "invalid input for transferMoney" in text
    assert fake.tool_calls() == [("call_bad", "transferMoney", {INVALID_JSON: BROKEN_ARGS})]
    assert LEDGER.transfers == before


async def test_malformed_streamed_arguments_are_recorded_and_answered_as_a_tool_error(
    wire: Wire,
) -> None:
    await _malformed_turn(wire, stream=True)


async def test_malformed_json_arguments_are_recorded_and_answered_as_a_tool_error(
    fake_openai: FakeOpenAI, anyio_backend: str
) -> None:
    # Only OpenAI-style replies carry arguments as text outside streams; Anthropic's are objects.
    model = make_model("openai", fake_openai)
    try:
        await _malformed_turn(Wire("openai", fake_openai, model), stream=False)
    finally:
        await model.aclose()


async def test_an_unknown_tool_is_answered_to_the_model_as_an_error(wire: Wire) -> None:
    app = wire.app()
    chat = app.start_chat(banking.name, actor="alice")
    wire.fake.queue(Reply(calls=(Call("call_x", "wireMoney", '{"amount": 5}'),)),
                    Reply(text="That tool does not exist, sorry."))

    result = await app.send(chat.id, "wire $5", actor="alice")

    assert result.finish_reason == "stop"
    [(ref, text)] = wire.fake.tool_results()
    assert ref == "call_x" and "unknown tool 'wireMoney'" in text
