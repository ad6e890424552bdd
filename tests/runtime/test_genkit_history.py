"""Genkit's history annotations on the messages Interlock returns.

Each test names the Genkit source it matches (firebase/genkit at 77656d5):
`js/ai/src/generate/resolve-tool-requests.ts` (`resolveToolRequest`, `toPendingOutput`,
`resolveResumedToolRequest`, `resolveResumeOption`). docs/genkit.md has the table.
"""

from __future__ import annotations

from typing import Any

from interlock.api.schemas import ChatPublic
from interlock.domain import (
    RespondEntry,
    RestartEntry,
    StreamEvent,
    ToolContext,
    tool,
)
from interlock.domain.chat.history import history
from interlock.domain.chat.messages import Message
from tests.kit import LookupInput, call, run, say
from tests.runtime.test_genkit import app_with


@tool(name="ask", side_effects=False, interrupts=True)
async def ask(input: LookupInput, ctx: ToolContext) -> str:
    if not ctx.resumed:
        ctx.interrupt({"question": input.key})
    return "asked again"


@tool(name="quiet", side_effects=False, interrupts=True)
async def quiet(input: LookupInput, ctx: ToolContext) -> str:
    ctx.interrupt()  # no payload
    return "never"


@tool(name="lookup", side_effects=False)
async def lookup(input: LookupInput, ctx: ToolContext) -> str:
    return input.key.upper()


def metadata(message: Message) -> list[dict[str, Any] | None]:
    return [p.metadata for p in message.content]


def test_a_pause_and_a_respond_resume_annotate_the_history_as_genkit_does(store: str) -> None:
    """`resolveToolRequest`: a paused request part gets `metadata.interrupt` (the payload);
    `toPendingOutput`: a sibling that ran gets `metadata.pendingOutput`.
    `resolveResumedToolRequest`: on resume the paused part loses `interrupt` and gains
    `resolvedInterrupt`, the sibling loses `pendingOutput` and its replayed response says
    `source: "pending"`; `resolveResumeOption`: the tool message carries
    `resumed: resume.metadata || true`. The client sees all of it on the turn and the chat."""
    app, script = app_with(store, [ask, lookup], [
        call(("ask", {"key": "why"}, "a1"), ("lookup", {"key": "k"}, "l1")), say("ok")])
    chat = app.start_chat("g", actor="alice")
    sent = run(app.send(chat.id, "go", actor="alice"))
    assert sent.finish_reason == "interrupted"
    assert metadata(sent.message) == [{"interrupt": {"question": "why"}}, {"pendingOutput": "K"}]
    assert sent.messages[-1] == sent.message

    done = run(app.resume(chat.id, actor="bob", metadata={"ticket": 7}, respond=[
        RespondEntry(ref="a1", name="ask", output="because")]))
    assert done.finish_reason == "stop"
    _, model, tool_message, _ = ChatPublic.of(app.get_chat(chat.id)).messages
    assert metadata(model) == [{"resolvedInterrupt": {"question": "why"}}, None]
    assert tool_message.metadata == {"resumed": {"ticket": 7}}
    assert metadata(tool_message) == [{"interruptResponse": True}, {"source": "pending"}]
    assert [p.tool_response.output for p in tool_message.content  # type: ignore[union-attr]
            ] == ["because", "K"]
    assert [m.role for m in done.messages] == ["tool", "model"]
    assert done.messages[0].metadata == {"resumed": {"ticket": 7}}
    # Deliberate difference: the model is sent the history as recorded, unannotated.
    sent_to_model = script.requests[-1].messages
    assert all(p.metadata is None for m in sent_to_model for p in m.content)


def test_a_restart_resolves_the_interrupt_and_a_bare_resume_says_resumed_true(store: str) -> None:
    """`resolveResumedToolRequest` (restart branch): the re-run's response goes in the tool
    message and the request keeps `resolvedInterrupt`; with no `resume.metadata` the tool
    message says `resumed: true`. An interrupt with no payload is `interrupt: true`
    (`interrupt: ie.metadata || true`)."""
    app, _ = app_with(store, [ask, quiet], [
        call(("ask", {"key": "why"}, "a1"), ("quiet", {"key": "q"}, "q1")), say("ok")])
    chat = app.start_chat("g", actor="alice")
    sent = run(app.send(chat.id, "go", actor="alice"))
    assert metadata(sent.message) == [{"interrupt": {"question": "why"}}, {"interrupt": True}]

    half = run(app.resume(chat.id, actor="bob", restart=[RestartEntry(ref="a1", name="ask")]))
    assert half.finish_reason == "interrupted" and half.messages == []
    [model] = [m for m in ChatPublic.of(app.get_chat(chat.id)).messages if m.role == "model"]
    # Interlock's partial resume (Genkit has none): the answered call's output is stashed.
    assert metadata(model) == [
        {"resolvedInterrupt": {"question": "why"}, "pendingOutput": "asked again"},
        {"interrupt": True},
    ]
    done = run(app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref="q1", name="quiet", output="fine")]))
    tool_message = done.messages[0]
    assert tool_message.metadata == {"resumed": True}
    # both answered by a decision, none pending; only the respond is the client's answer
    assert metadata(tool_message) == [None, {"interruptResponse": True}]
    model = ChatPublic.of(app.get_chat(chat.id)).messages[1]
    assert metadata(model) == [{"resolvedInterrupt": {"question": "why"}},
                               {"resolvedInterrupt": True}]


@tool(name="interrupter", side_effects=False, interrupts=True)
async def interrupter(input: LookupInput, ctx: ToolContext) -> int:
    ctx.interrupt()
    return 0


@tool(name="truth", side_effects=False)
async def truth(input: LookupInput, ctx: ToolContext) -> bool:
    return True


@tool(name="resumable", side_effects=False, interrupts=True)
async def resumable(input: LookupInput, ctx: ToolContext) -> bool:
    if (ctx.resumed or {}).get("status") != "ok":
        ctx.interrupt()
    return True


def test_a_responded_part_says_interrupt_response_as_genkit_resumes_generation(
    store: str,
) -> None:
    """js/genkit/tests/generate_test.ts "can resume generation": `interrupter` is answered
    with `respond(..., 23)`, `truth` ran, `resumable` is restarted with `{status: "ok"}`.
    The tool message is `[{metadata: {interruptResponse: true}, toolResponse: interrupter 23},
    {metadata: {source: "pending"}, toolResponse: truth}, {toolResponse: resumable}]`
    (js/ai/src/tool.ts `respondTool`: `interruptResponse: options?.metadata ?? true`)."""
    app, _ = app_with(store, [interrupter, truth, resumable], [
        call(("interrupter", {"key": "i"}, "i1"), ("truth", {"key": "t"}, "t1"),
             ("resumable", {"key": "r"}, "r1")),
        say("ok")])
    chat = app.start_chat("g", actor="alice")
    run(app.send(chat.id, "go", actor="alice"))
    done = run(app.resume(chat.id, actor="bob",
                          respond=[RespondEntry(ref="i1", name="interrupter", output=23)],
                          restart=[RestartEntry(ref="r1", name="resumable",
                                                resumed_metadata={"status": "ok"})]))
    tool_message = done.messages[0]
    assert [(p.tool_response.name, p.tool_response.output, p.metadata)  # type: ignore[union-attr]
            for p in tool_message.content] == [
        ("interrupter", 23, {"interruptResponse": True}),
        ("truth", True, {"source": "pending"}),
        ("resumable", True, None)]
    model = ChatPublic.of(app.get_chat(chat.id)).messages[1]
    assert metadata(model) == [{"resolvedInterrupt": True}, None, {"resolvedInterrupt": True}]
    wire = tool_message.wire()["content"][0]
    assert wire["metadata"] == {"interruptResponse": True}


def _answered(store: str, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The tool message's part for `interrupter` answered with the respond `entry`."""
    app, _ = app_with(store, [interrupter], [call(("interrupter", {"key": "i"}, "i1")),
                                             say("ok")])
    chat = app.start_chat("g", actor="alice")
    run(app.send(chat.id, "go", actor="alice"))
    done = run(app.resume(chat.id, actor="bob", respond=[RespondEntry.model_validate(entry)]))
    [part] = done.messages[0].content
    assert part.tool_response is not None and part.tool_response.output == 23
    again = ChatPublic.of(app.get_chat(chat.id)).messages[2].content[0].metadata
    assert again == part.metadata  # the chat read later says the same
    return part.metadata


def test_the_respond_builders_metadata_is_the_interrupt_response(store: str) -> None:
    """js/ai/src/tool.ts `respondTool`: `interruptResponse: options?.metadata ?? true`."""
    given = {"ref": "i1", "name": "interrupter", "output": 23, "metadata": {"by": "form"}}
    assert _answered(store, given) == {"interruptResponse": {"by": "form"}}


def test_a_raw_tool_response_part_is_kept_as_given(store: str) -> None:
    """js/genkit/tests/generate_test.ts "streams a generated tool message when resumed" and
    "can resume generation" pass raw `toolResponse` parts: the tool message holds them as
    they were given, with their own metadata and no `interruptResponse` added."""
    raw = {"toolResponse": {"ref": "i1", "name": "interrupter", "output": 23}}
    assert _answered(store, raw) is None
    assert _answered(store, {**raw, "metadata": {"mine": 1}}) == {"mine": 1}


def test_a_round_without_a_pause_is_returned_as_recorded(sqlite_store: str) -> None:
    """Genkit annotates only interrupted rounds (`resolveToolRequests` returns a plain tool
    message otherwise); clients that never pause see exactly what they saw before."""
    app, _ = app_with(sqlite_store, [lookup], [call(("lookup", {"key": "k"}, "l1")), say("ok")])
    chat = app.start_chat("g", actor="alice")
    done = run(app.send(chat.id, "go", actor="alice"))
    assert done.messages == app.get_chat(chat.id).state.messages
    assert all(m.metadata is None and all(p.metadata is None for p in m.content)
               for m in done.messages)


def test_replay_reads_the_same_annotations(store: str) -> None:
    """The annotations are derived from the recorded events, so a chat loaded again (a fresh
    service on the same store) reads them identically."""
    app, _ = app_with(store, [ask, lookup], [
        call(("ask", {"key": "why"}, "a1"), ("lookup", {"key": "k"}, "l1")), say("ok")])
    chat = app.start_chat("g", actor="alice")
    run(app.send(chat.id, "go", actor="alice"))
    run(app.resume(chat.id, actor="bob", respond=[RespondEntry(ref="a1", name="ask", output="1")]))
    before = ChatPublic.of(app.get_chat(chat.id)).model_dump(mode="json")
    state = app.get_chat(chat.id).state
    whole = history(state)
    assert [history(state, k) for k in range(6)] == [whole[k:] for k in range(6)]
    app.close()
    again, _ = app_with(store, [ask, lookup], [])
    try:
        assert ChatPublic.of(again.get_chat(chat.id)).model_dump(mode="json") == before
    finally:
        again.close()


class Stream:
    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    async def __call__(self, event: StreamEvent) -> None:
        self.events.append(event)

    @property
    def kinds(self) -> list[str]:
        return [e.type for e in self.events]


def test_a_streamed_resume_sends_the_rebuilt_tool_message_before_the_model(store: str) -> None:
    """js/ai/src/generate/action.ts (`generateHelper`): after `resolveResumeOption` the
    resumed tool message is streamed as one `tool` chunk (`resumedToolMessage.content`)
    before the model is called, holding every response: the ones the client responded with,
    the restarted tools' and the stashed ones. Interlock streams it as `tool_message`, after
    the restarted tool's own `tool_request`/`tool_response` events."""
    app, _ = app_with(store, [ask, quiet, lookup], [
        call(("ask", {"key": "why"}, "a1"), ("quiet", {"key": "q"}, "q1"),
             ("lookup", {"key": "k"}, "l1")),
        say("ok")])
    chat = app.start_chat("g", actor="alice")
    paused = Stream()
    run(app.send(chat.id, "go", actor="alice", emit=paused))
    assert "tool_message" not in paused.kinds  # an interrupted round has no tool message yet

    resumed = Stream()
    done = run(app.resume(chat.id, actor="bob", emit=resumed, metadata={"by": "ui"},
                          restart=[RestartEntry(ref="a1", name="ask")],
                          respond=[RespondEntry(ref="q1", name="quiet", output="fine")]))
    assert resumed.kinds == [
        "tool_request", "tool_response", "tool_message", "text", "turn_end"]
    message = resumed.events[2].data
    assert message == done.messages[0].wire()
    assert message["role"] == "tool" and message["metadata"] == {"resumed": {"by": "ui"}}
    assert [(p["toolResponse"]["ref"], p["toolResponse"]["output"], p.get("metadata"))
            for p in message["content"]] == [
        ("a1", "asked again", None), ("q1", "fine", {"interruptResponse": True}),
        ("l1", "K", {"source": "pending"})]


def test_each_round_streams_its_tool_message_before_the_next_model_call(
    sqlite_store: str,
) -> None:
    """js/ai/src/generate/action.ts: "if the loop will continue, stream out the tool response
    message" (`makeChunk('tool', ...)`), so a plain round streams one too, unannotated."""
    app, _ = app_with(sqlite_store, [lookup], [call(("lookup", {"key": "k"}, "l1")), say("ok")])
    chat = app.start_chat("g", actor="alice")
    stream = Stream()
    run(app.send(chat.id, "go", actor="alice", emit=stream))
    assert stream.kinds == ["tool_request", "tool_response", "tool_message", "text", "turn_end"]
    assert stream.events[2].data == {"role": "tool", "content": [
        {"toolResponse": {"ref": "l1", "name": "lookup", "output": "K"}}]}
