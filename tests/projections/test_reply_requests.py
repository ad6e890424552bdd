"""A model reply is followed by one ToolRequested event per tool request (the card's event);
chats recorded while a reply carried its requests itself (`ModelResponded.requests`, no
ToolRequested) read the same everywhere."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest

from interlock.bootstrap import build_service
from interlock.domain import Interlock
from interlock.domain.chat import events as ev
from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.state import ToolCall
from interlock.examples.banking import AGENTS
from interlock.projections import SqlReadModels, open_views
from interlock.projections.interface import DecisionFilter, InboxFilter
from interlock.projections.views.decisions import DecisionsView
from interlock.stores.erasure_keys import KeyStore
from tests.projections.conftest import dumps, rebuilt
from tests.projections.flows import as_carried, banking_flows, expected_decisions, expected_inbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def recorded_carried(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as patched:
        patched.setattr(Chat, "record_model_reply", as_carried)
        yield


def _calls(app: Interlock, chat_id: UUID) -> list[dict[str, Any]]:
    calls: list[ToolCall] = list(app.get_chat(chat_id).state.calls.values())
    return [c.model_dump(mode="json", include={"ref", "name", "input", "status", "output",
                                               "turn", "requested_by"}) for c in calls]


async def test_both_forms_of_a_reply_give_the_same_calls_and_views(
    app: Interlock, models: SqlReadModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patched:
        patched.setattr(Chat, "record_model_reply", as_carried)
        old, _ = await banking_flows(app)
    new, position = await banking_flows(app)
    old_events = [e for c in old for e in app.chat_events(c)]
    new_events = [e for c in new for e in app.chat_events(c)]
    assert not any(isinstance(e, ev.ToolRequested) for e in old_events)  # both forms here
    assert any(isinstance(e, ev.ModelResponded) and e.requests for e in old_events)
    assert any(isinstance(e, ev.ToolRequested) for e in new_events)
    assert not any(isinstance(e, ev.ModelResponded) and e.requests for e in new_events)
    for before, now in zip(old, new, strict=True):
        assert _calls(app, before) == _calls(app, now)
    models.wait(position)
    chats = [*old, *new]
    assert models.inbox(InboxFilter(), limit=100).items == expected_inbox(app, chats)
    assert models.decisions(DecisionFilter(), limit=100).items == expected_decisions(app, chats)
    assert {(r.tool, r.ref) for r in models.inbox(InboxFilter(), limit=100).items} == {
        ("userApproval", c.ref) for chat in chats
        for c in app.get_chat(chat).state.calls.values() if c.status == "interrupted"}
    assert dumps(models) == rebuilt(app)  # applied live (kept events) and read back alike


async def test_each_request_follows_its_reply_as_a_tool_requested_event(app: Interlock) -> None:
    [chat_id, *_], _ = await banking_flows(app)
    events = app.chat_events(chat_id)
    state = app.get_chat(chat_id).state
    replies = [(i, e) for i, e in enumerate(events) if isinstance(e, ev.ModelResponded)]
    assert any(reply.message.tool_requests for _, reply in replies)
    for i, reply in replies:
        assert reply.requests is None  # the ToolRequested events say it
        wanted = [(r.ref, r.name, r.input) for r in reply.message.tool_requests]
        following = events[i + 1:i + 1 + len(wanted)]
        assert [(e.ref, e.name, e.input) for e in following
                if isinstance(e, ev.ToolRequested)] == wanted
        for call in following:
            assert state.calls[call.ref].requested_at == call.timestamp
    assert list(ev.requested_calls(events)) == events  # nothing to stand in for


async def test_a_carried_reply_reads_as_its_calls_at_its_version(
    app: Interlock, recorded_carried: None
) -> None:
    [chat_id, *_], _ = await banking_flows(app)
    events = app.chat_events(chat_id)
    replies = [e for e in events if isinstance(e, ev.ModelResponded) and e.requests]
    state = app.get_chat(chat_id).state
    for reply in replies:
        for request in reply.requests or []:
            call = state.calls[request.ref]
            assert call.name == request.name and call.requested_at == reply.timestamp
    expanded = list(ev.requested_calls(events))
    assert len(expanded) == len(events) + sum(len(r.requests or []) for r in replies)
    assert [(e.ref, e.originator_version) for e in expanded if isinstance(e, ev.ToolRequested)
            ] == [(r.ref, reply.originator_version) for reply in replies
                  for r in reply.requests or []]


@pytest.mark.parametrize("carried", [False, True], ids=["requested", "carried"])
async def test_an_erased_chat_keeps_its_calls_without_their_inputs(
    store: str, carried: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if carried:
        monkeypatch.setattr(Chat, "record_model_reply", as_carried)
    app = build_service(store, AGENTS)
    keys = KeyStore.open(app)
    app.protect_personal_data(keys)
    try:
        [chat_id, *_], _ = await banking_flows(app)
        before = _calls(app, chat_id)
        assert any(c["input"] for c in before)
        keys.erase(chat_id)
        app.chats.take(chat_id)  # the cached chat holds the plaintext: load it from the log
        after = _calls(app, chat_id)
        assert [(c["ref"], c["name"], c["status"]) for c in after] == [
            (c["ref"], c["name"], c["status"]) for c in before]  # the refs stay in the clear
        assert all(c["input"] is None for c in after)
        tools = {row["tool"] for row in rebuilt_decisions(app) if row["chat_id"] == str(chat_id)}
        assert tools == {"userApproval"}  # a rebuilt view still names the decided tool
    finally:
        app.close()


def rebuilt_decisions(app: Interlock) -> list[dict[str, Any]]:
    fresh = open_views(app)
    try:
        runner = next(r for r in fresh.runners if isinstance(r.view, DecisionsView))
        runner.rebuild()
        return runner.view.dump()
    finally:
        fresh.close()
