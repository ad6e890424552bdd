"""Commands reuse the chat this process committed, yet see every other writer's events."""

from __future__ import annotations

import pytest

from interlock.bootstrap import build_service
from interlock.domain import RespondEntry
from interlock.domain.errors import ChatNotFoundError
from tests.kit import call, make_app, run, say


def test_a_cached_chat_catches_up_with_another_process_write(store: str) -> None:
    app, _, _ = make_app(store, [call(("approve", {"action": "x"})), say("done"), say("again")])
    other, _, _ = make_app(store, [say("from the other process")])
    chat = app.start_chat("ops", actor="alice", tenant="t")
    first = run(app.send(chat.id, "go", actor="alice", tenant="t"))
    assert app.chats.take(chat.id) is not None  # the command gave its chat back
    [interrupt] = first.interrupts
    other_resume = run(
        other.resume(
            chat.id,
            respond=[RespondEntry(ref=interrupt.ref, name="approve", output={"approved": True})],
            actor="bob",
            tenant="t",
        )
    )
    assert other_resume.finish_reason == "stop"
    run(app.send(chat.id, "hello", actor="alice", tenant="t"))  # cold: taken above
    reloaded = build_service(store).get_chat(chat.id)
    cached = app.chats.take(chat.id)
    assert cached is not None and cached.version == reloaded.version
    assert cached.state.messages == reloaded.state.messages


def test_a_cached_chat_is_brought_up_to_date_with_one_read(store: str) -> None:
    app, _, _ = make_app(store, [say("one"), say("three")])
    other, _, _ = make_app(store, [say("two")])
    chat = app.start_chat("ops", actor="alice", tenant="t")
    run(app.send(chat.id, "1", actor="alice", tenant="t"))
    run(other.send(chat.id, "2", actor="alice", tenant="t"))  # app's cached copy is now behind
    result = run(app.send(chat.id, "3", actor="alice", tenant="t"))
    assert result.text == "three"
    texts = [m.text for m in build_service(store).get_chat(chat.id).state.messages]
    assert texts == ["1", "one", "2", "two", "3", "three"]


def test_another_tenant_cannot_use_a_cached_chat(store: str) -> None:
    app, _, _ = make_app(store, [say("one")])
    chat = app.start_chat("ops", actor="alice", tenant="t")
    run(app.send(chat.id, "1", actor="alice", tenant="t"))
    with pytest.raises(ChatNotFoundError):
        run(app.send(chat.id, "2", actor="mallory", tenant="other"))
