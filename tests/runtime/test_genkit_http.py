"""Resume metadata, per-call max_turns and declared interrupts through HTTP and the client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.client import Client
from interlock.client._errors import InterlockAPIError
from interlock.domain import Agent, FunctionModel, ToolContext, interrupt, tool
from interlock.projections import open_read_models
from tests.api.server import ThreadServer
from tests.kit import ApprovalInput, LookupInput, Script, call

KEYS = {"key-a": {"id": "alice", "tenant": "t", "roles": ["requester", "approver"]}}


def ask_first(ctx: ToolContext) -> None:
    ctx.interrupt("CONFIRM_ME")


@tool(name="deploy", interrupts=True)
async def deploy(input: LookupInput, ctx: ToolContext) -> str:
    if not ctx.resumed:
        ask_first(ctx)  # through a helper: no name in this function says "interrupt"
    return f"deployed {ctx.resume_metadata}"


@tool(name="lookup", side_effects=False)
async def lookup(input: LookupInput, ctx: ToolContext) -> str:
    return input.key


CONFIRM = interrupt("confirm", "Ask first.", input=ApprovalInput, output=bool)


@pytest.fixture
def client(sqlite_store: str) -> Iterator[Client]:
    script = Script([call(("lookup", {"key": str(i)})) for i in range(2)]
                    + [call(("deploy", {"key": "x"}))] + [call(("lookup", {"key": "y"}))] * 3)
    agent = Agent(name="g", system="", tools=[deploy, lookup, CONFIRM],
                  model=FunctionModel(script), max_turns=5)
    service = build_service(sqlite_store, [agent])
    views = open_read_models(service)
    server = ThreadServer(make_app(service, views, AuthConfig.from_mapping(KEYS)))
    try:
        with Client(server.url, api_key="key-a") as c:
            yield c
    finally:
        server.stop()
        views.close()


def test_a_chat_started_with_its_message_takes_the_budget_a_send_takes(client: Client) -> None:
    _, opened = client.start("g", "go", max_turns=1)
    assert opened.finish_reason == "max_turns"
    assert [m["role"] for m in opened.messages] == ["user", "model", "tool", "model", "tool"]


def test_agents_send_and_resume_carry_the_new_fields(client: Client) -> None:
    """`GET /v1/agents` says `interrupts` as declared (a helper-interrupting tool included);
    `max_turns` per send and resume and the resume's `metadata` go through the client."""
    [agent] = client.agents()
    assert {t["name"]: t["interrupts"] for t in agent["tools"]} == {
        "deploy": True, "lookup": False, "confirm": True}
    chat = client.chat("g")
    with pytest.raises(InterlockAPIError) as refused:
        chat.send("go", max_turns=0)
    assert refused.value.status == 422
    first = chat.send("go", max_turns=1)
    assert first.finish_reason == "max_turns"
    paused = chat.send("deploy")
    [pending] = paused.interrupts
    assert pending.metadata == "CONFIRM_ME"
    done = chat.resume(restart=[pending.restart()], metadata={"ticket": "OPS-7"}, max_turns=1)
    assert done.finish_reason == "max_turns"
    restarted = [e for e in chat.events() if e["type"] == "Restarted"]
    assert restarted[0]["data"]["resume_metadata"] == {"ticket": "OPS-7"}
    outputs = [p["toolResponse"]["output"] for m in done.messages if m["role"] == "tool"
               for p in m["content"]]
    assert outputs[0] == "deployed {'ticket': 'OPS-7'}"
    # History annotations over HTTP (js/ai/src/generate/resolve-tool-requests.ts): the model
    # message of the paused call as the chat now reads it, and the resumed tool message.
    assert paused.message is not None
    assert paused.message["content"][0]["metadata"] == {"interrupt": "CONFIRM_ME"}
    messages = chat.state()["messages"]
    [resumed] = [m for m in messages if m["role"] == "tool"
                 and m.get("metadata", {}).get("resumed") == {"ticket": "OPS-7"}]
    [asked] = [m for m in messages if m["role"] == "model"
               and any(p.get("toolRequest", {}).get("ref") == pending.ref for p in m["content"])]
    assert asked["content"][0]["metadata"] == {"resolvedInterrupt": "CONFIRM_ME"}
    assert resumed["content"][0]["toolResponse"]["ref"] == pending.ref
