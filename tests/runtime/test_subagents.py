"""Sub-agents: an agent used as a tool of another (`agent_tool`), in a chat of its own.

Deliberate difference (docs/genkit.md): Genkit JS's prompt tools transfer the conversation
itself (`transferPreamble`, js/ai/src/generate/resolve-tool-requests.ts); Interlock's
sub-agent's steps are its own chat's events, linked to the parent, and its interrupts
surface on the parent's call.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from interlock.audit.integrity import Verifier
from interlock.bootstrap import build_service
from interlock.domain import (
    Agent,
    FunctionModel,
    Interlock,
    RespondEntry,
    RestartEntry,
    ToolContext,
    agent_tool,
    tool,
)
from interlock.domain.chat.events import Responded
from interlock.projections import open_read_models
from interlock.projections.interface import InboxFilter
from tests.kit import LookupInput, Script, call, run, say


@tool(name="confirm", side_effects=False, interrupts=True)
async def confirm(input: LookupInput, ctx: ToolContext) -> str:
    ctx.interrupt({"sure": input.key})


def services(store: str) -> tuple[Interlock, Script, Script]:
    lead, helper = Script([call(("helper", {"message": "find x"}, "h1")), say("lead done")]), \
        Script([call(("confirm", {"key": "x"}, "c1")), say("helper found x")])
    agents = [
        Agent(name="lead", system="", model=FunctionModel(lead),
              tools=[agent_tool("helper", "Ask the helper")]),
        Agent(name="helper", system="", model=FunctionModel(helper), tools=[confirm]),
    ]
    return build_service(store, agents), lead, helper


def test_a_sub_agents_interrupt_surfaces_on_the_parent_and_is_resumed_there(store: str) -> None:
    app, lead, _ = services(store)
    parent = app.start_chat("lead", actor="alice")
    paused = run(app.send(parent.id, "go", actor="alice"))

    assert paused.finish_reason == "interrupted"
    [pending] = paused.interrupts
    sub = pending.metadata["subagent"]
    assert (pending.ref, pending.name, sub["agent"]) == ("h1", "helper", "helper")
    assert [(i["ref"], i["metadata"]) for i in sub["interrupts"]] == [("c1", {"sure": "x"})]
    child = app.get_chat(UUID(sub["chat_id"]))
    assert child.state.metadata == {"parent": {"chat_id": str(parent.id), "ref": "h1",
                                               "agent": "helper"}}
    assert (child.status, child.state.started_by, child.state.tenant) == (
        "interrupted", "alice", "default")
    views = open_read_models(app)
    try:
        views.wait(paused.position)
        rows = views.inbox(InboxFilter(), limit=10).items
        assert sorted((str(r.chat_id), r.ref) for r in rows) == sorted(
            [(str(parent.id), "h1"), (str(child.id), "c1")])  # both pauses are in the inbox
    finally:
        views.close()

    done = run(app.resume(parent.id, actor="bob", metadata={"ticket": 1}, restart=[RestartEntry(
        ref="h1", name="helper", resumed_metadata={"respond": [
            {"ref": "c1", "name": "confirm", "output": "yes"}]})]))

    assert (done.finish_reason, done.text) == ("stop", "lead done")
    answer = lead.requests[-1].messages[-1].content[0].tool_response
    assert answer is not None and answer.output == "helper found x"
    child = app.get_chat(child.id)
    assert child.status == "idle"
    [decision] = [e for e in app.chat_events(child.id) if isinstance(e, Responded)]
    assert (decision.actor, decision.resume_metadata) == ("bob", {"ticket": 1})
    assert Verifier(app.recorder, app.mapper, None).verify_all() == []


def test_a_refused_sub_agent_decision_pauses_the_parent_again(sqlite_store: str) -> None:
    app, _, helper = services(sqlite_store)
    parent = app.start_chat("lead", actor="alice")
    [pending] = run(app.send(parent.id, "go", actor="alice")).interrupts
    child_id = UUID(pending.metadata["subagent"]["chat_id"])
    version = app.get_chat(child_id).version

    again = run(app.resume(parent.id, actor="bob", restart=[RestartEntry(
        ref="h1", name="helper", resumed_metadata={"respond": [
            {"ref": "nope", "name": "confirm", "output": "yes"}]})]))

    assert again.finish_reason == "interrupted"
    [pending] = again.interrupts
    assert "nope" in pending.metadata["subagent"]["error"]
    assert [i["ref"] for i in pending.metadata["subagent"]["interrupts"]] == ["c1"]
    assert app.get_chat(child_id).version == version  # the sub-agent's chat is untouched
    assert len(helper.requests) == 1


def test_a_sub_agent_resumed_on_its_own_chat_is_picked_up_by_a_bare_restart(
    sqlite_store: str,
) -> None:
    app, lead, _ = services(sqlite_store)
    parent = app.start_chat("lead", actor="alice")
    [pending] = run(app.send(parent.id, "go", actor="alice")).interrupts
    child_id = UUID(pending.metadata["subagent"]["chat_id"])
    run(app.resume(child_id, actor="bob", respond=[
        RespondEntry(ref="c1", name="confirm", output="yes")]))

    done = run(app.resume(parent.id, actor="bob",
                          restart=[RestartEntry(ref="h1", name="helper")]))

    assert done.text == "lead done"
    output: Any = lead.requests[-1].messages[-1].content[0].tool_response
    assert output.output == "helper found x"


def test_a_retried_call_carries_on_with_the_sub_agent_chat_it_started(store: str) -> None:
    """The parent's turn died after the sub-agent's chat was started (a crash, then a retry
    of the same call): the call runs again with the same idempotency key and finds that chat
    instead of starting a second one."""
    from interlock.domain.runtime.subagents import SubAgentInput
    from interlock.domain.runtime.tools import ToolInterrupt

    app, _, _ = services(store)
    parent = app.start_chat("lead", actor="alice")
    helper_tool = app.agent("lead").tools[0]
    ctx = ToolContext(chat_id=str(parent.id), ref="h1", attempt=1,
                      idempotency_key=f"{parent.id}:h1:1", tenant="default", actor="alice",
                      runner=app)
    paused: list[Any] = []
    for _ in range(2):  # the first run, then the retried turn's run of the same call
        try:
            run(helper_tool.fn(SubAgentInput(message="find x"), ctx))
        except ToolInterrupt as interrupt:
            paused.append(interrupt.metadata["subagent"])
    first, again = paused
    assert first["chat_id"] == again["chat_id"]  # one child chat, not two
    assert [i["ref"] for i in again["interrupts"]] == ["c1"]
    child = app.get_chat(UUID(first["chat_id"]))
    assert [m.role for m in child.state.messages].count("user") == 1  # the message sent once
    app.close()
