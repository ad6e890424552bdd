"""The Chat aggregate's resume rules, pure: no store, no I/O, no service.

Genkit checks the same things when it resumes (js/ai/src/generate/resolve-tool-requests.ts,
`resolveResumedToolRequest`: every respond/restart must match a pending interrupted request by
name and ref). Interlock refuses the whole batch with a typed error and records nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from interlock.domain import Chat, Message, Part, RespondEntry, RestartEntry, ToolRequest
from interlock.domain.chat import events as ev
from interlock.domain.chat.jsonsafe import UnsafeJsonError
from interlock.domain.errors import (
    DuplicateRefError,
    EmptyResumeError,
    InterlockError,
    InterruptNameMismatchError,
    InterruptNotPendingError,
    InvalidToolInputError,
    InvalidToolOutputError,
    TurnInProgressError,
    UnknownInterruptError,
)
from tests.kit import Effects, make_tools

TOOLS = {t.name: t for t in make_tools(Effects())}


def paused(*requests: tuple[str, dict[str, Any]]) -> Chat:
    """A chat whose model asked for `requests`, all of which interrupted."""
    chat = Chat.start("ops", actor="alice", tenant="t1")
    chat.send_message("go", actor="alice")
    parts = [Part(tool_request=ToolRequest(name=n, input=i)) for n, i in requests]
    chat.record_model_reply(Message(role="model", content=parts))
    for ref in chat.state.batch:
        chat.record_interrupted(ref, {"why": ref})
    chat.finish_turn("interrupted")
    chat.collect_events()
    return chat


def refused(chat: Chat, error: type[InterlockError], **resume: Any) -> InterlockError:
    """Resume must raise `error` and leave the chat exactly as it was."""
    before, version = chat.state.model_copy(deep=True), chat.version
    with pytest.raises(error) as caught:
        chat.resume(resume.pop("respond", []), resume.pop("restart", []), actor="bob",
                    tools=TOOLS, **resume)
    assert chat.pending_events == [] and chat.version == version and chat.state == before
    return caught.value


def test_an_unknown_ref_is_refused() -> None:
    chat = paused(("approve", {"action": "x"}))
    error = refused(chat, UnknownInterruptError,
                    respond=[RespondEntry(ref="nope", name="approve", output={"approved": True})])
    assert error.details == {"ref": "nope"}


def test_a_decided_interrupt_is_not_pending_and_says_who_decided_it_and_when() -> None:
    chat = paused(("approve", {"action": "x"}), ("approve", {"action": "y"}))
    first, second = chat.state.batch
    chat.resume([RespondEntry(ref=first, name="approve", output={"approved": True})], [],
                actor="carol", tools=TOOLS)
    [decided] = chat.collect_events()
    chat.finish_turn("interrupted")  # the other one still waits
    chat.collect_events()
    error = refused(chat, InterruptNotPendingError,
                    respond=[RespondEntry(ref=first, name="approve", output={"approved": False}),
                             RespondEntry(ref=second, name="approve", output={"approved": True})])
    assert error.details == {"ref": first, "decided_by": "carol", "decision": "respond",
                             "decided_at": decided.timestamp.isoformat().replace("+00:00", "Z")}


def test_a_call_that_never_interrupted_is_not_pending() -> None:
    chat = Chat.start("ops", actor="alice", tenant="t1")
    chat.send_message("go", actor="alice")
    chat.record_model_reply(Message(role="model", content=[
        Part(tool_request=ToolRequest(name="lookup", input={"key": "k"}))]))
    [ref] = chat.state.batch
    chat.record_completed(ref, {"value": "K"})
    chat.finish_turn("stop")
    chat.collect_events()
    error = refused(chat, InterruptNotPendingError,
                    respond=[RespondEntry(ref=ref, name="lookup", output={})])
    assert error.details["decision"] is None and error.details["decided_by"] is None


def test_a_name_that_does_not_match_the_ref_is_refused() -> None:
    chat = paused(("approve", {"action": "x"}))
    [ref] = chat.state.batch
    error = refused(chat, InterruptNameMismatchError,
                    restart=[RestartEntry(ref=ref, name="deploy")])
    assert error.details == {"ref": ref, "expected": "approve", "given": "deploy"}


def test_one_ref_twice_in_a_batch_is_refused_even_across_respond_and_restart() -> None:
    chat = paused(("deploy", {"env": "prod"}))
    [ref] = chat.state.batch
    refused(chat, DuplicateRefError,
            respond=[RespondEntry(ref=ref, name="deploy", output={})],
            restart=[RestartEntry(ref=ref, name="deploy")])


def test_an_empty_resume_is_refused() -> None:
    refused(paused(("approve", {"action": "x"})), EmptyResumeError)


def test_a_replaced_input_that_fails_the_tools_input_schema_is_refused() -> None:
    chat = paused(("deploy", {"env": "prod"}))
    [ref] = chat.state.batch
    error = refused(chat, InvalidToolInputError, restart=[
        RestartEntry(ref=ref, name="deploy", replace_input={"env": "moon"})])
    assert error.details["errors"][0]["loc"] == ["env"]


def test_an_output_that_fails_the_tools_output_schema_is_refused() -> None:
    chat = paused(("approve", {"action": "x"}))
    [ref] = chat.state.batch
    error = refused(chat, InvalidToolOutputError, respond=[
        RespondEntry(ref=ref, name="approve", output={"approved": "maybe"})])
    assert error.details["tool"] == "approve"


def test_one_bad_entry_refuses_the_whole_batch() -> None:
    chat = paused(("approve", {"action": "x"}), ("deploy", {"env": "prod"}))
    good, bad = chat.state.batch
    refused(chat, InvalidToolInputError,
            respond=[RespondEntry(ref=good, name="approve", output={"approved": True})],
            restart=[RestartEntry(ref=bad, name="deploy", replace_input={"env": 1})])


def test_unrecordable_resume_metadata_is_refused() -> None:
    chat = paused(("approve", {"action": "x"}))
    [ref] = chat.state.batch
    refused(chat, UnsafeJsonError, metadata={"x": float("nan")},
            respond=[RespondEntry(ref=ref, name="approve", output={"approved": True})])


def test_a_running_turn_refuses_a_resume() -> None:
    """A restarted tool may still be running: deciding now could run it twice."""
    chat = Chat.start("ops", actor="alice", tenant="t1")
    chat.send_message("go", actor="alice")
    chat.record_model_reply(Message(role="model", content=[
        Part(tool_request=ToolRequest(name="deploy", input={"env": "prod"}))]))
    [ref] = chat.state.batch
    chat.record_interrupted(ref, None)  # recorded, but the turn has not finished
    chat.collect_events()
    assert chat.status == "running"
    refused(chat, TurnInProgressError, restart=[RestartEntry(ref=ref, name="deploy")])


def test_resume_metadata_is_recorded_on_every_decision_of_the_batch() -> None:
    """Genkit's `resume.metadata` (resolve-tool-requests.ts, `resolveResumeOption`) lands on
    the resumed tool message; Interlock records it on each decision event instead, since the
    decisions are what the audit trail reads."""
    chat = paused(("approve", {"action": "x"}), ("deploy", {"env": "prod"}))
    first, second = chat.state.batch
    chat.resume([RespondEntry(ref=first, name="approve", output={"approved": True},
                              metadata={"by": "form"})],
                [RestartEntry(ref=second, name="deploy")],
                actor="bob", tools=TOOLS, metadata={"ticket": "OPS-7"})
    responded, restarted = chat.collect_events()
    assert isinstance(responded, ev.Responded) and isinstance(restarted, ev.Restarted)
    assert responded.resume_metadata == restarted.resume_metadata == {"ticket": "OPS-7"}
    assert responded.metadata == {"by": "form"} and restarted.resumed_metadata is None
    call = chat.state.calls[second]
    assert call.resumed == {} and call.resume_metadata == {"ticket": "OPS-7"}
    assert call.interrupt == {"why": second}


@pytest.mark.parametrize("event_class", [ev.Responded, ev.Restarted])
def test_decisions_stored_before_resume_metadata_still_load(event_class: type) -> None:
    """v1 decision events (no `resume_metadata`) are upcast to v2 when read."""
    from eventsourcing.persistence import StoredEvent

    from interlock.domain.storage.mapper import PydanticMapper

    chat = paused(("approve", {"action": "x"}))
    v1 = (b'{"originator_id":"%s","originator_version":6,"timestamp":"2026-01-01T00:00:00Z",'
          b'"ref":"r","name":"approve","actor":"bob","input_sha256":"%s"}'
          % (str(chat.id).encode(), b"0" * 64))
    mapper = PydanticMapper(transcoder=None)  # type: ignore[arg-type]
    event = mapper.to_domain_event(StoredEvent(chat.id, 6, event_class.TOPIC, v1))
    assert isinstance(event, event_class) and event.resume_metadata is None  # type: ignore[attr-defined]
    assert mapper.to_domain_event(mapper.to_stored_event(event)) == event
