"""Replay: every version of a chat is reconstructible, and long chats load from their events."""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.application import Repository

from interlock.domain import Chat, Interlock, RespondEntry, RestartEntry
from interlock.domain.chat.aggregate import Chat as ChatClass
from tests.kit import call, make_app, run, say

VOLATILE = {"chain_tip"}


def test_state_at_every_version_equals_the_live_state(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    live: dict[int, dict[str, Any]] = {}
    original = ChatClass._trigger

    def recording_trigger(self: Chat, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        live[self.version] = self.state.model_dump(exclude=VOLATILE)

    monkeypatch.setattr(ChatClass, "_trigger", recording_trigger)
    app, _, _ = make_app(
        store,
        [
            call(
                ("lookup", {"key": "a"}), ("approve", {"action": "x"}), ("deploy", {"env": "prod"})
            ),
            say("done"),
            say("bye"),
        ],
    )
    chat = app.start_chat("ops", actor="alice")
    approve, deploy = run(app.send(chat.id, "go", actor="alice")).interrupts
    run(
        app.resume(
            chat.id,
            actor="bob",
            respond=[RespondEntry(ref=approve.ref, name="approve", output={"approved": True})],
        )
    )
    run(
        app.resume(
            chat.id,
            actor="bob",
            restart=[RestartEntry(ref=deploy.ref, name="deploy", resumed_metadata={"ok": True})],
        )
    )
    run(app.send(chat.id, "thanks", actor="alice"))
    final = app.get_chat(chat.id)
    assert final.status == "idle" and set(live) == set(range(2, final.version + 1))
    for version, state in live.items():
        assert app.get_chat(chat.id, version=version).state.model_dump(exclude=VOLATILE) == state


def test_a_chat_of_2000_events_loads_from_its_events_alone(store: str) -> None:
    app, _, _ = make_app(store, [say(f"pong {i}") for i in range(700)])
    chat = app.start_chat("ops", actor="alice")
    version = chat.version
    while version < 2000:
        version = run(app.send(chat.id, "ping", actor="alice")).version
    loaded = app.get_chat(chat.id)
    assert loaded.version >= 2000
    assert app.snapshots is None  # snapshots sat outside the chain (docs/audit.md)
    without_snapshots: Repository[Any] = Repository(event_store=app.events)
    replayed = without_snapshots.get(chat.id)
    assert replayed.state == loaded.state  # type: ignore[attr-defined]
    assert loaded.state.messages[-1].text == f"pong {(loaded.version - 1) // 3 - 1}"
    assert isinstance(app, Interlock)
