"""List and null tool inputs through each provider's wire protocol.

Genkit passes a tool's input schema and arguments to providers as they are
(js/plugins/compat-oai/src/model.ts: `parameters: tool.inputSchema`, `arguments:
JSON.stringify(part.toolRequest.input)`; js/plugins/anthropic/src/runner/base.ts:
`input_schema: inputSchema`), so a list or null input reaches the tool unchanged, but OpenAI
and Anthropic refuse a non-object schema. Deliberate difference (docs/genkit.md): Interlock
boxes such an input as `{"input": value}` on the wire only (schema, history and the model's
calls alike), so the tool and the recorded history hold the value itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from interlock.domain import Agent, Interlock, ToolContext, tool
from interlock.domain.chat.events import ToolRequested
from tests.kit import LookupInput
from tests.providers.conftest import Wire
from tests.providers.fakes import Call, Reply
from tests.providers.helpers import Collected, events_of

pytestmark = pytest.mark.anyio


def shapes_app(wire: Wire, seen: list[Any]) -> Interlock:
    @tool(name="tag", side_effects=False)
    async def tag(input: list[str], ctx: ToolContext) -> int:
        seen.append(input)
        return len(input)

    @tool(name="ping", side_effects=False)
    async def ping(input: None, ctx: ToolContext) -> str:
        seen.append(input)
        return "pong"

    @tool(name="lookup", side_effects=False)
    async def lookup(input: LookupInput, ctx: ToolContext) -> str:
        seen.append(input.key)
        return input.key

    agent = Agent(name="shapes", system="", tools=[tag, ping, lookup], model=wire.model)
    return Interlock([agent])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_list_and_null_inputs_reach_the_tool_and_the_history_unchanged(
    wire: Wire, stream: bool
) -> None:
    seen: list[Any] = []
    app = shapes_app(wire, seen)
    wire.fake.queue(
        Reply(calls=(Call("c1", "tag", '{"input": ["a", "b"]}'),
                     Call("c2", "ping", '{"input": null}'),
                     Call("c3", "lookup", '{"key": "k"}'))),
        Reply(text="done"))
    chat = app.start_chat("shapes", actor="alice")

    done = await app.send(chat.id, "go", actor="alice", emit=Collected() if stream else None)

    assert (done.finish_reason, done.text) == ("stop", "done")
    assert seen == [["a", "b"], None, "k"]
    requested = events_of(app, chat.id, ToolRequested)
    assert [e.input for e in requested] == [["a", "b"], None, {"key": "k"}]
    # What the provider was sent the second time: the same boxed calls it made...
    assert wire.fake.tool_calls() == [
        ("c1", "tag", {"input": ["a", "b"]}), ("c2", "ping", {"input": None}),
        ("c3", "lookup", {"key": "k"})]
    # ...against object schemas it accepts, an object tool's schema untouched.
    schemas = wire.fake.tool_schemas()
    assert schemas["tag"] == {"type": "object", "additionalProperties": False,
                              "properties": {"input": {"type": "array",
                                                       "items": {"type": "string"}}},
                              "required": ["input"]}
    assert schemas["ping"]["properties"] == {"input": {"type": "null"}}
    assert schemas["lookup"]["type"] == "object" and "key" in schemas["lookup"]["properties"]


async def test_an_unboxed_call_to_a_boxed_tool_fails_the_call_and_tells_the_model(
    wire: Wire,
) -> None:
    seen: list[Any] = []
    app = shapes_app(wire, seen)
    wire.fake.queue(Reply(calls=(Call("c1", "tag", '{"tags": ["a"]}'),)), Reply(text="sorry"))
    chat = app.start_chat("shapes", actor="alice")

    done = await app.send(chat.id, "go", actor="alice")

    assert done.text == "sorry" and seen == []
    [(ref, text)] = wire.fake.tool_results()
    assert ref == "c1" and "invalid input for tag" in text
