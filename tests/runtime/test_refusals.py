"""Every refused resume raises a typed error, writes nothing, and leaves the interrupt resumable."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.domain import Interlock, RespondEntry, RestartEntry
from interlock.domain.errors import (
    DuplicateRefError,
    EmptyResumeError,
    ForbiddenError,
    InterlockError,
    InterruptNameMismatchError,
    InterruptNotPendingError,
    InvalidToolInputError,
    InvalidToolOutputError,
    PendingInterruptsError,
    StaleInterruptError,
    TurnInProgressError,
    UnknownInterruptError,
)
from interlock.domain.results import Interrupt
from tests.kit import call, make_app, run, say

APPROVE_AND_DEPLOY = [call(("approve", {"action": "x"}), ("deploy", {"env": "prod"})), say("done")]


def started(store: str, **kw: Any) -> tuple[Interlock, Any, Interrupt, Interrupt]:
    app, _, _ = make_app(store, APPROVE_AND_DEPLOY, **kw)
    chat = app.start_chat("ops", actor="alice")
    approve, deploy = run(app.send(chat.id, "go", actor="alice")).interrupts
    return app, chat.id, approve, deploy


def assert_refused(
    app: Interlock, chat_id: Any, error: type[InterlockError], **kw: Any
) -> InterlockError:
    before = len(app.chat_events(chat_id))
    with pytest.raises(error) as caught:
        run(app.resume(chat_id, actor="bob", **kw))
    assert len(app.chat_events(chat_id)) == before
    assert app.get_chat(chat_id).status == "interrupted"
    return caught.value


def finish(app: Interlock, chat_id: Any, approve: Interrupt, deploy: Interrupt) -> None:
    done = run(
        app.resume(
            chat_id,
            actor="bob",
            respond=[RespondEntry(ref=approve.ref, name="approve", output={"approved": True})],
            restart=[RestartEntry(ref=deploy.ref, name="deploy", resumed_metadata={"ok": True})],
        )
    )
    assert done.finish_reason == "stop"


def test_unknown_ref(store: str) -> None:
    app, chat_id, approve, deploy = started(store)
    err = assert_refused(
        app,
        chat_id,
        UnknownInterruptError,
        respond=[RespondEntry(ref="nope", name="approve", output={"approved": True})],
    )
    assert err.details["ref"] == "nope"
    finish(app, chat_id, approve, deploy)


def test_wrong_name(store: str) -> None:
    app, chat_id, approve, deploy = started(store)
    err = assert_refused(
        app,
        chat_id,
        InterruptNameMismatchError,
        respond=[RespondEntry(ref=approve.ref, name="deploy", output={})],
    )
    assert err.details == {"ref": approve.ref, "expected": "approve", "given": "deploy"}
    finish(app, chat_id, approve, deploy)


def test_same_ref_twice_and_empty(store: str) -> None:
    app, chat_id, approve, deploy = started(store)
    entry = RespondEntry(ref=approve.ref, name="approve", output={"approved": True})
    assert_refused(
        app,
        chat_id,
        DuplicateRefError,
        respond=[entry],
        restart=[RestartEntry(ref=approve.ref, name="approve")],
    )
    assert_refused(app, chat_id, EmptyResumeError)
    finish(app, chat_id, approve, deploy)


def test_batch_is_all_or_nothing(store: str) -> None:
    app, chat_id, approve, deploy = started(store)
    assert_refused(
        app,
        chat_id,
        UnknownInterruptError,
        respond=[RespondEntry(ref=approve.ref, name="approve", output={"approved": True})],
        restart=[RestartEntry(ref="ghost", name="deploy")],
    )
    assert len(app.get_chat(chat_id).pending_interrupts()) == 2
    finish(app, chat_id, approve, deploy)


def test_invalid_output_and_invalid_replaced_input(store: str) -> None:
    app, chat_id, approve, deploy = started(store)
    err = assert_refused(
        app,
        chat_id,
        InvalidToolOutputError,
        respond=[RespondEntry(ref=approve.ref, name="approve", output={"approved": "maybe"})],
    )
    assert err.details["errors"][0]["loc"] == ["approved"]
    assert_refused(
        app,
        chat_id,
        InvalidToolInputError,
        restart=[RestartEntry(ref=deploy.ref, name="deploy", replace_input={"env": "moon"})],
    )
    finish(app, chat_id, approve, deploy)


@pytest.mark.parametrize("output", [{"approved": "yes"}, {"approved": 1}, {"approved": "true"}])
def test_what_a_person_decides_with_is_taken_as_sent_not_coerced(
    store: str, output: Any
) -> None:
    """A respond's output must have the declared JSON types: the log records what the
    person sent, never a value pydantic guessed from it (lax mode takes all three for true).
    Edited inputs: test_an_edit_is_validated_kept_and_needs_someone_else_to_approve_it."""
    app, chat_id, approve, deploy = started(store)
    assert_refused(app, chat_id, InvalidToolOutputError,
                   respond=[RespondEntry(ref=approve.ref, name="approve", output=output)])
    finish(app, chat_id, approve, deploy)


def test_ref_from_another_chat(store: str) -> None:
    app, chat_id, approve, deploy = started(store)
    other = app.start_chat("ops", actor="alice")
    with pytest.raises(UnknownInterruptError):
        run(
            app.resume(
                other.id,
                actor="bob",
                respond=[RespondEntry(ref=approve.ref, name="approve", output={"approved": True})],
            )
        )
    assert len(app.chat_events(other.id)) == 1
    finish(app, chat_id, approve, deploy)


def test_already_decided_says_who_and_when(store: str) -> None:
    app, chat_id, approve, deploy = started(store)
    run(
        app.resume(
            chat_id,
            actor="bob",
            respond=[RespondEntry(ref=approve.ref, name="approve", output={"approved": True})],
        )
    )
    err = assert_refused(
        app,
        chat_id,
        InterruptNotPendingError,
        respond=[RespondEntry(ref=approve.ref, name="approve", output={"approved": False})],
    )
    assert err.details["decided_by"] == "bob" and err.details["decision"] == "respond"
    assert err.details["decided_at"]
    run(
        app.resume(
            chat_id,
            actor="bob",
            restart=[RestartEntry(ref=deploy.ref, name="deploy", resumed_metadata={"ok": True})],
        )
    )


def test_tool_call_that_never_interrupted_is_not_pending(store: str) -> None:
    app, _, _ = make_app(store, [call(("lookup", {"key": "k"}), ("approve", {"action": "x"}))])
    chat = app.start_chat("ops", actor="alice")
    run(app.send(chat.id, "go", actor="alice"))
    lookup_ref = app.get_chat(chat.id).state.batch[0]
    err = assert_refused(
        app,
        chat.id,
        InterruptNotPendingError,
        respond=[RespondEntry(ref=lookup_ref, name="lookup", output={})],
    )
    assert err.details["decision"] is None


def test_new_message_while_interrupts_pending(store: str) -> None:
    app, chat_id, approve, deploy = started(store)
    before = len(app.chat_events(chat_id))
    with pytest.raises(PendingInterruptsError) as caught:
        run(app.send(chat_id, "hello?", actor="alice"))
    assert set(caught.value.details["refs"]) == {approve.ref, deploy.ref}
    assert len(app.chat_events(chat_id)) == before
    finish(app, chat_id, approve, deploy)


def test_distinct_approver_refuses_the_sender(store: str) -> None:
    app, chat_id, approve, deploy = started(store, distinct=True)
    before = len(app.chat_events(chat_id))
    with pytest.raises(ForbiddenError):
        run(
            app.resume(
                chat_id,
                actor="alice",
                respond=[RespondEntry(ref=approve.ref, name="approve", output={"approved": True})],
            )
        )
    assert len(app.chat_events(chat_id)) == before
    finish(app, chat_id, approve, deploy)


def test_no_resume_while_a_restarted_tool_runs(store: str) -> None:
    """A second approver cannot make a running restart run twice."""
    app, _, effects = make_app(store, APPROVE_AND_DEPLOY)
    chat = app.start_chat("ops", actor="alice")
    approve, deploy = run(app.send(chat.id, "go", actor="alice")).interrupts
    running = app.get_chat(chat.id)
    running.resume(
        [],
        [RestartEntry(ref=deploy.ref, name="deploy", resumed_metadata={"ok": True})],
        actor="bob",
        tools=app.agent("ops").tool_map,
    )
    app.commit(running)  # the write-ahead commit; the deploy is now running elsewhere
    before = len(app.chat_events(chat.id))
    with pytest.raises(TurnInProgressError):
        run(
            app.resume(
                chat.id,
                actor="carol",
                respond=[RespondEntry(ref=approve.ref, name="approve", output={"approved": True})],
            )
        )
    assert len(app.chat_events(chat.id)) == before and effects.deploys == []


def test_a_decision_on_an_input_that_changed_is_stale(store: str) -> None:
    """Approve exactly what you saw: an entry may carry the interrupt's input_sha256."""
    app, _, _ = make_app(store, APPROVE_AND_DEPLOY)
    chat = app.start_chat("ops", actor="alice")
    approve, deploy = run(app.send(chat.id, "go", actor="alice")).interrupts
    seen = deploy.input_sha256
    again = run(
        app.resume(
            chat.id,
            actor="bob",
            restart=[
                RestartEntry(
                    ref=deploy.ref, name="deploy", replace_input={"env": "prod", "version": "9.9"}
                )
            ],
        )
    )
    [changed] = [i for i in again.interrupts if i.ref == deploy.ref]
    assert changed.input_sha256 != seen
    err = assert_refused(
        app,
        chat.id,
        StaleInterruptError,
        restart=[
            RestartEntry(
                ref=deploy.ref, name="deploy", resumed_metadata={"ok": True}, input_sha256=seen
            )
        ],
    )
    assert err.details["input_sha256"] == changed.input_sha256
    run(
        app.resume(
            chat.id,
            actor="bob",
            respond=[
                RespondEntry(
                    ref=approve.ref,
                    name="approve",
                    output={"approved": True},
                    input_sha256=approve.input_sha256,
                )
            ],
            restart=[
                RestartEntry(
                    ref=deploy.ref,
                    name="deploy",
                    resumed_metadata={"ok": True},
                    input_sha256=changed.input_sha256,
                )
            ],
        )
    )
    assert app.get_chat(chat.id).status == "idle"
