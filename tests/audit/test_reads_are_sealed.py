"""The seal covers everything the application reads from a stored event, or it is refused."""

from __future__ import annotations

import json
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent

from interlock.cli.main import main
from interlock.domain import Chat, Interlock
from interlock.domain.chat.events import Responded
from interlock.domain.storage.mapper import TamperedEventError
from tests.projections.flows import app_for, banking_flows
from tests.projections.tamper import EventsTable

pytestmark = pytest.mark.anyio


def _version_of(app: Interlock, chat_id: UUID, kind: type) -> int:
    return next(e.originator_version for e in app.events.get(chat_id) if isinstance(e, kind))


async def test_a_decision_moved_to_another_chat_fails_verify_and_is_refused_on_read(
    app: Interlock, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    chats, _ = await banking_flows(app)
    victim, other = chats[1], chats[0]
    version = _version_of(app, victim, Responded)
    table = EventsTable(store, victim)
    _, state = table.records()[version]
    table.write_raw(version, state.replace(str(victim).encode(), str(other).encode()))
    assert main(["verify", str(victim), "--store", store]) == 1
    assert f"broken at version {version}: chain does not match" in capsys.readouterr().out
    fresh = app_for(store)  # no cache: the forged record is read from the store
    try:
        with pytest.raises(TamperedEventError, match="names another chat"):
            list(fresh.events.get(victim))
        assert fresh.get_chat(other).version > 0  # the other chat is not polluted
    finally:
        fresh.close()


async def test_a_changed_topic_column_fails_verify(
    app: Interlock, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    chats, _ = await banking_flows(app)
    version = _version_of(app, chats[1], Responded)
    EventsTable(store, chats[1]).set_topic(version, "interlock:Restarted")
    assert main(["verify", "--all", "--store", store]) == 1
    assert f"chat {chats[1]}: broken at version {version}" in capsys.readouterr().out


async def test_the_same_json_value_in_other_bytes_fails_verify(app: Interlock, store: str) -> None:
    """Format 2 seals bytes, not a parse of them: no parser can read something unsealed."""
    chats, _ = await banking_flows(app)
    table = EventsTable(store, chats[0])
    _, state = table.records()[2]
    assert json.loads(state.replace(b'":', b'": ')) == json.loads(state)
    table.write_raw(2, state.replace(b'":', b'": '))
    assert main(["verify", str(chats[0]), "--store", store]) == 1


@pytest.mark.parametrize("deleted", [False, True])
async def test_verify_of_a_chat_without_events_fails(
    app: Interlock, store: str, deleted: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    chats, _ = await banking_flows(app)
    target = chats[2]
    if deleted:
        EventsTable(store, target).delete_from(1)
    else:
        target = UUID("00000000-0000-4000-8000-000000000000")
    assert main(["verify", str(target), "--store", store]) == 1
    assert f"chat {target}: no such chat" in capsys.readouterr().out


def _legacy_chat(app: Interlock) -> Chat:
    """A chat whose first event was written by Interlock before chain format 2."""
    chat = Chat.start("bankingAgent", actor="alice", tenant="bank")
    chat.seal(app.sealer.sign_v1)
    [started] = chat.collect_events()
    record = app.mapper.to_stored_event(started)
    old_bytes = started.__pydantic_serializer__.to_json(started)  # chain among the fields
    app.recorder.insert_events([type(record)(record.originator_id, record.originator_version,
                                             record.topic, old_bytes)])
    return chat


async def test_format_1_events_keep_verifying_and_format_2_follows_them(
    app: Interlock, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = _legacy_chat(app)
    result = await app.send(chat.id, "transfer $50 to savings", actor="alice")
    assert result.interrupts
    assert main(["verify", str(chat.id), "--store", store]) == 0
    table = EventsTable(store, chat.id)
    assert table.states()[1]["chain"] and table.states()[2]["chain"].startswith("2:")
    table.set_topic(1, "interlock:UserMessageSent")  # format 1 did not seal the topic
    assert main(["verify", str(chat.id), "--store", store]) == 1
    assert "broken at version 1: the topic does not fit" in capsys.readouterr().out
    table.set_topic(1, "interlock:ChatStarted")
    table.write(1, {**table.states()[1], "originator_id": str(UUID(int=7))})
    assert main(["verify", str(chat.id), "--store", store]) == 1
    assert "broken at version 1: the event's JSON names another chat" in capsys.readouterr().out


async def test_a_format_1_message_holds_no_fingerprint_and_still_verifies(
    app: Interlock, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`UserMessageSent` gained `fingerprint` after chain format 1: a format 1 message,
    written without it, verifies and reads back; one that holds it cannot be format 1."""
    chat = Chat.start("bankingAgent", actor="alice", tenant="bank")
    chat.send_message("hello", actor="alice")
    chat.finish_turn("stop")
    prev, records = None, []
    for event in chat.collect_events():  # sealed and stored as Interlock did then
        data = event.model_dump(mode="json", exclude={"chain", "fingerprint"})
        event.__dict__["chain"] = prev = app.sealer.digest(prev, data)
        old = event.__pydantic_serializer__.to_json(event, exclude={"fingerprint"})
        records.append(StoredEvent(event.originator_id, event.originator_version,
                                   event.TOPIC, old))
    app.recorder.insert_events(records)
    assert main(["verify", str(chat.id), "--store", store]) == 0
    assert app.get_chat(chat.id).state.fingerprint is None
    result = await app.send(chat.id, "transfer $50 to savings", actor="alice")
    assert result.interrupts and app.get_chat(chat.id).state.fingerprint
    assert main(["verify", str(chat.id), "--store", store]) == 0
    table = EventsTable(store, chat.id)
    table.write(2, {**table.states()[2], "fingerprint": None})
    assert main(["verify", str(chat.id), "--store", store]) == 1
    assert "broken at version 2: the topic does not fit" in capsys.readouterr().out
