"""Provider faults: bounded retries, a failed turn with a clear reason, and a working retry."""

from __future__ import annotations

import pytest

from interlock.domain import StreamEvent
from interlock.domain.chat.events import ModelResponded
from interlock.domain.chat.messages import text_message
from interlock.domain.errors import ModelError
from interlock.domain.runtime.models import ChunkSink, ModelChunk, ModelRequest
from interlock.examples.banking import LEDGER, banking
from interlock.providers import RetryPolicy
from tests.providers.conftest import Wire, make_model
from tests.providers.fakes import Broken, Call, Failure, Reply, Slow
from tests.providers.helpers import Collected, event_types, events_of

pytestmark = pytest.mark.anyio

OVERLOADED = "The server had an error while processing your request."
TRANSFER = Call("call_transfer", "transferMoney", '{"amount": 10, "to_account": "savings"}')


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_429_is_retried_and_the_turn_succeeds(wire: Wire, stream: bool) -> None:
    app = wire.app()
    chat = app.start_chat(banking.name, actor="alice")
    wire.fake.queue(Failure(429, "Rate limit reached", {"retry-after-ms": "1"}),
                    Reply(text="Hello!"))

    result = await app.send(chat.id, "hi", actor="alice", emit=Collected() if stream else None)

    assert (result.finish_reason, result.text) == ("stop", "Hello!")
    assert len(wire.fake.requests) == 2
    assert wire.fake.requests[0].body == wire.fake.requests[1].body
    assert len(events_of(app, chat.id, ModelResponded)) == 1


async def test_500s_until_retries_run_out_fail_the_turn_and_a_retry_works(wire: Wire) -> None:
    app = wire.app()
    chat = app.start_chat(banking.name, actor="alice")
    wire.fake.queue(*[Failure(500, OVERLOADED)] * 3)

    failed = await app.send(chat.id, "hi", actor="alice")

    assert failed.finish_reason == "failed"
    assert failed.error is not None
    assert f"HTTP 500: {OVERLOADED}" in failed.error and "after 3 attempts" in failed.error
    assert len(wire.fake.requests) == 3
    assert event_types(app, chat.id) == [
        "ChatStarted", "UserMessageSent", "TurnFinished"]
    assert app.get_chat(chat.id).status == "failed"

    wire.fake.queue(Reply(text="Sorry for the wait. Hello!"))
    retried = await app.retry(chat.id, actor="alice")

    assert (retried.finish_reason, retried.text) == ("stop", "Sorry for the wait. Hello!")
    assert wire.fake.user_texts() == ["hi"]
    assert app.get_chat(chat.id).status == "idle"


async def test_a_retry_after_a_completed_tool_does_not_run_it_again(wire: Wire) -> None:
    app = wire.app()
    chat = app.start_chat(banking.name, actor="alice")
    before = LEDGER.transfers
    wire.fake.queue(Reply(calls=(TRANSFER,)), *[Failure(503, OVERLOADED)] * 3)

    failed = await app.send(chat.id, "transfer $10 to savings", actor="alice")
    assert (failed.finish_reason, LEDGER.transfers) == ("failed", before + 1)

    wire.fake.queue(Reply(text="Done."))
    retried = await app.retry(chat.id, actor="alice")

    assert (retried.finish_reason, LEDGER.transfers) == ("stop", before + 1)
    assert [ref for ref, _ in wire.fake.tool_results()] == ["call_transfer"]


async def test_a_client_error_is_not_retried(wire: Wire) -> None:
    app = wire.app()
    chat = app.start_chat(banking.name, actor="alice")
    wire.fake.queue(Failure(400, "Invalid schema for function 'transferMoney'"))

    failed = await app.send(chat.id, "hi", actor="alice")

    assert failed.finish_reason == "failed"
    reason = "HTTP 400: Invalid schema for function 'transferMoney'"
    assert failed.error == f"{wire.model.name}: {reason}"
    assert len(wire.fake.requests) == 1


async def test_a_timeout_is_retried(wire: Wire) -> None:
    model = make_model(wire.provider, wire.fake, RetryPolicy(2, 0.001, 0.005), timeout=0.2)
    wire.fake.queue(Slow(Reply(text="too late"), delay=0.6), Reply(text="in time"))
    try:
        reply = await model.generate(_hello())
    finally:
        await model.aclose()
    assert reply.message.text == "in time"
    assert len(wire.fake.requests) == 2


async def test_timeouts_until_retries_run_out_say_so(wire: Wire) -> None:
    model = make_model(wire.provider, wire.fake, RetryPolicy(2, 0.001, 0.005), timeout=0.2)
    wire.fake.queue(*[Slow(Reply(text="too late"), delay=0.6)] * 2)
    try:
        with pytest.raises(ModelError, match=r"request timed out \(after 2 attempts\)"):
            await model.generate(_hello())
    finally:
        await model.aclose()


async def test_a_stream_cut_before_any_text_is_retried(wire: Wire) -> None:
    seen = Collected()
    wire.fake.queue(Broken(Reply(text="Hello there!"), after=1), Reply(text="Hello there!"))

    reply = await wire.model.generate(_hello(), _sink(seen))

    assert reply.message.text == "Hello there!" == seen.text()
    assert len(wire.fake.requests) == 2


async def test_a_stream_cut_after_text_fails_without_repeating_it(wire: Wire) -> None:
    app, seen = wire.app(), Collected()
    chat = app.start_chat(banking.name, actor="alice")
    wire.fake.queue(Broken(Reply(text="Hello there, friend!"), after=5), Reply(text="unused"))

    failed = await app.send(chat.id, "hi", actor="alice", emit=seen)

    assert failed.finish_reason == "failed"
    assert failed.error is not None and "connection" in failed.error.lower()
    assert len(wire.fake.requests) == 1
    assert "Hello there, friend!".startswith(seen.text()) and seen.text()
    assert event_types(app, chat.id) == [
        "ChatStarted", "UserMessageSent", "TurnFinished"]


def _hello() -> ModelRequest:
    return ModelRequest(messages=[text_message("user", "hi")])


def _sink(seen: Collected) -> ChunkSink:
    async def forward(chunk: ModelChunk) -> None:
        await seen(StreamEvent(type="text", data={"text": chunk.text}))

    return forward
