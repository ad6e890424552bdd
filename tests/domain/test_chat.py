"""The Chat aggregate on its own: recorded events, hashes, refs, topics, upcasting."""

from __future__ import annotations

from typing import Any, ClassVar

from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import resolve_topic

from interlock.domain import Chat, Message, Part, RespondEntry, RestartEntry, ToolRequest
from interlock.domain.chat import events as ev
from interlock.domain.chat.canonical import canonical_json, sha256_hex
from interlock.domain.storage.mapper import PydanticMapper
from tests.kit import Effects, make_tools

TOOLS = {t.name: t for t in make_tools(Effects())}


def interrupted_chat(*inputs: dict[str, Any]) -> Chat:
    chat = Chat.start("ops", actor="alice", tenant="t1")
    chat.send_message("go", actor="alice")
    parts = [Part(tool_request=ToolRequest(name="deploy", input=i)) for i in inputs]
    chat.record_model_reply(Message(role="model", content=parts))
    for ref in chat.state.batch:
        chat.record_interrupted(ref, {"needs": "ok"})
    chat.finish_turn("interrupted")
    return chat


def test_decisions_record_actor_and_the_hash_of_the_canonical_input() -> None:
    chat = interrupted_chat({"env": "prod", "version": "é"}, {"version": "2", "env": "prod"})
    first, second = chat.state.batch
    chat.collect_events()
    chat.resume(
        [RespondEntry(ref=first, name="deploy", output={"done": True})],
        [RestartEntry(ref=second, name="deploy", replace_input={"env": "staging"})],
        actor="bob",
        tools=TOOLS,
    )
    responded, restarted = chat.collect_events()
    assert isinstance(responded, ev.Responded) and isinstance(restarted, ev.Restarted)
    assert responded.actor == restarted.actor == "bob"
    assert canonical_json({"version": "é", "env": "prod"}) == '{"env":"prod","version":"é"}'
    assert responded.input_sha256 == sha256_hex({"env": "prod", "version": "é"})
    assert restarted.input_sha256 == sha256_hex({"env": "prod", "version": "2"})
    assert restarted.replace_input == {"env": "staging", "version": "1.0"}
    assert restarted.replaced_input_sha256 == sha256_hex({"env": "staging", "version": "1.0"})
    assert restarted.original_input == {"version": "2", "env": "prod"}


def test_replaying_the_recorded_events_rebuilds_the_same_state() -> None:
    chat = interrupted_chat({"env": "prod"})
    [ref] = chat.state.batch
    chat.resume(
        [RespondEntry(ref=ref, name="deploy", output={"x": 1})], [], actor="bob", tools=TOOLS
    )
    events = chat.collect_events()
    replayed = None
    for event in events:
        replayed = event.mutate(replayed)
    assert replayed is not None and replayed.state == chat.state
    assert [m.role for m in replayed.state.messages] == ["user", "model", "tool"]


def test_every_event_has_a_stable_topic_independent_of_its_module() -> None:
    classes = [
        c
        for c in vars(ev).values()
        if isinstance(c, type) and issubclass(c, ev.ChatEvent) and c is not ev.ChatEvent
    ]
    assert len(classes) >= 11
    for cls in classes:
        assert cls.TOPIC == f"interlock:{cls.__name__}"
        assert resolve_topic(cls.TOPIC) is cls


class Noted(ev.ChatEvent):
    """A test event at version 2: `note` was called `text` in version 1."""

    class_version: ClassVar[int] = 2
    note: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["note"] = state.pop("text")


def test_old_payloads_are_upcast_when_read() -> None:
    mapper = PydanticMapper(transcoder=None)  # type: ignore[arg-type]
    chat = Chat.start("ops", actor="a", tenant="t")
    v1 = (
        b'{"originator_id":"%s","originator_version":2,'
        b'"timestamp":"2026-01-01T00:00:00Z","text":"hello"}' % str(chat.id).encode()
    )
    event = mapper.to_domain_event(StoredEvent(chat.id, 2, Noted.TOPIC, v1))
    assert isinstance(event, Noted) and event.note == "hello"
    again = mapper.to_domain_event(mapper.to_stored_event(event))
    assert again == event


def test_refs_that_are_not_plain_are_replaced() -> None:
    chat = Chat.start("ops", actor="a", tenant="t")
    chat.send_message("go", actor="a")
    weird = [("r\x00", "deploy"), ("x" * 81, "deploy"), ("ok-1", "bad\x00name"), ("ok-1", "deploy")]
    parts = [Part(tool_request=ToolRequest(ref=ref, name=name, input={})) for ref, name in weird]
    chat.record_model_reply(Message(role="model", content=parts))
    refs = chat.state.batch
    assert refs[2] == "ok-1" and len(set(refs)) == 4
    assert all(r.isascii() and r.replace("-", "").replace("_", "").isalnum() for r in refs)
