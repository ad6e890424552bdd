"""The founding card, read against a recorded chat: "Chat aggregates record ToolRequested,
Interrupted, Responded and Restarted events, so the pending-interrupt set is a projection and
resume validation is a domain invariant enforced when applying events."

The chat is the demo's (`interlock demo`), over the transfer limit so that it records all
four: the approval is answered (Responded), the held transfer restarted (Restarted).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from uuid import UUID

import pytest

from interlock.bootstrap import service_from
from interlock.cli.main import main
from interlock.domain import Interlock, RespondEntry
from interlock.domain.chat import events as ev
from interlock.domain.errors import InterruptNotPendingError, UnknownInterruptError
from interlock.settings import load_settings

CARD = ("ToolRequested", "Interrupted", "Responded", "Restarted")


@pytest.fixture
def recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[Interlock, UUID]]:
    store = f"sqlite:///{tmp_path / 'card.db'}"
    assert main(["demo", "--store", store, "--say", "Transfer $2500 to savings."]) == 0
    capsys.readouterr()
    app = service_from(load_settings(store=store))
    try:
        [started] = app.recorder.select_notifications(0, 10, topics=[ev.ChatStarted.TOPIC])
        yield app, started.originator_id
    finally:
        app.close()


def pending(events: Sequence[ev.ChatEvent]) -> set[str]:
    """The pending-interrupt set as a projection of the card's four events alone."""
    calls: dict[str, str] = {}
    for e in events:
        if isinstance(e, ev.ToolRequested):
            calls[e.ref] = "requested"
        elif isinstance(e, (ev.Interrupted, ev.Responded, ev.Restarted)):
            assert e.ref in calls, f"{type(e).__name__} of {e.ref}, which was never requested"
            calls[e.ref] = type(e).__name__
    return {ref for ref, last in calls.items() if last == "Interrupted"}


def test_the_chat_records_the_cards_four_events(recorded: tuple[Interlock, UUID]) -> None:
    app, chat_id = recorded
    events = app.chat_events(chat_id)
    assert set(CARD) <= {type(e).__name__ for e in events}
    requested: set[str] = set()
    for i, e in enumerate(events):
        if isinstance(e, ev.ModelResponded):  # each request follows its reply, in order
            asked = [(r.ref, r.name, r.input) for r in e.message.tool_requests]
            after = events[i + 1:i + 1 + len(asked)]
            assert [(a.ref, a.name, a.input) for a in after
                    if isinstance(a, ev.ToolRequested)] == asked
            requested.update(ref for ref, _, _ in asked)
        elif isinstance(e, (ev.Interrupted, ev.Responded, ev.Restarted, ev.ToolCompleted)):
            assert e.ref in requested  # nothing happens to a call before it is requested


def test_the_pending_interrupt_set_is_a_projection_of_them(
    recorded: tuple[Interlock, UUID]
) -> None:
    app, chat_id = recorded
    events = app.chat_events(chat_id)
    seen = []
    for e in events:
        chat = app.get_chat(chat_id, version=e.originator_version)
        projected = pending(events[:e.originator_version])
        assert {c.ref for c in chat.pending_interrupts()} == projected
        seen.append(projected)
    assert [s for i, s in enumerate(seen) if s and s != seen[i - 1]] == [
        {"userApproval-1"}, {"transferMoney-2"}]  # the approval, then the held transfer


def test_resume_validation_holds_against_the_state_the_events_apply(
    recorded: tuple[Interlock, UUID]
) -> None:
    app, chat_id = recorded
    events = app.chat_events(chat_id)
    tools = app.agent("bankingAgent").tool_map
    waited = next(e for e in events if isinstance(e, ev.TurnFinished)
                  and e.reason == "interrupted")
    held = app.get_chat(chat_id, version=waited.originator_version)
    [call] = held.pending_interrupts()
    answer = RespondEntry(ref=call.ref, name=call.name, output={"approved": True})
    held.resume([answer], [], actor="bob", tools=tools)  # pending at that version: accepted
    assert [type(e).__name__ for e in held.collect_events()] == ["Responded"]

    done = app.get_chat(chat_id)
    with pytest.raises(InterruptNotPendingError):  # answered since: the events say so
        done.resume([answer], [], actor="bob", tools=tools)
    never = RespondEntry(ref="never-requested", name="userApproval", output={"approved": True})
    with pytest.raises(UnknownInterruptError):  # no ToolRequested: no call to answer
        app.get_chat(chat_id, version=waited.originator_version).resume(
            [never], [], actor="bob", tools=tools)
    assert done.collect_events() == []
