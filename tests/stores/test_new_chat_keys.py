"""PostgreSQL: a new chat's personal-data key is written with its first events, in their
transaction, and only for a group the append accepts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent

from interlock.bootstrap import build_service
from interlock.domain import Interlock
from interlock.examples.banking import AGENTS
from interlock.stores.erasure_keys import KeyStore
from interlock.stores.groupcommit import Append
from interlock.stores.postgres import InterlockPostgresRecorder


def first(chat: uuid.UUID) -> StoredEvent:
    return StoredEvent(originator_id=chat, originator_version=1, topic="t", state=b"{}")


@pytest.fixture
def app(pg_store: str) -> Iterator[Interlock]:
    app = build_service(pg_store, AGENTS)
    app.protect_personal_data(KeyStore.open(app))
    yield app
    app.close()


def recorder_of(app: Interlock) -> InterlockPostgresRecorder:
    assert isinstance(app.recorder, InterlockPostgresRecorder)
    return app.recorder


def stored_key(app: Interlock, chat: uuid.UUID) -> bytes | None:
    """The key row as another process reads it (a key store of its own, nothing cached)."""
    return KeyStore.open(app)._row(chat)[0]


def test_a_new_chat_has_its_key_once_its_first_events_are_stored(app: Interlock) -> None:
    keys = KeyStore.open(app)
    app.protect_personal_data(keys)
    chat = app.start_chat("bankingAgent", actor="ann", metadata={"customer": "Ann Example"})
    key = keys._row(chat.id)[0]
    assert key is not None and stored_key(app, chat.id) == key
    app.protect_personal_data(KeyStore.open(app))  # nothing cached: reads the stored key
    [started] = list(app.events.get(chat.id))
    assert started.metadata == {"customer": "Ann Example"}


def test_a_key_is_not_written_before_its_chats_first_events(app: Interlock) -> None:
    recorder = recorder_of(app)
    assert recorder.new_keys is not None
    chat = uuid.uuid4()
    recorder.new_keys.put(chat, b"k" * 32)
    assert stored_key(app, chat) is None  # kept in memory until the append
    recorder.insert_events([first(chat)])
    assert stored_key(app, chat) == b"k" * 32


def test_a_refused_group_leaves_no_key_and_the_others_keep_theirs(app: Interlock) -> None:
    recorder = recorder_of(app)
    assert recorder.new_keys is not None
    taken, fresh = uuid.uuid4(), uuid.uuid4()
    recorder.insert_events([first(taken)])  # another writer's chat, stored without our key
    forgotten: list[uuid.UUID] = []
    recorder.new_keys.refused.append(forgotten.append)
    recorder.new_keys.put(taken, b"t" * 32)
    recorder.new_keys.put(fresh, b"f" * 32)
    batch = [Append([first(taken)]), Append([first(fresh)])]
    recorder._flush(batch)  # one transaction for both groups
    assert isinstance(batch[0].error, IntegrityError) and batch[1].ids
    assert stored_key(app, taken) is None and stored_key(app, fresh) == b"f" * 32
    assert forgotten == [taken]
    assert recorder.new_keys.of([(0, first(taken)), (1, first(fresh))]) == []  # settled


def test_a_refused_chats_cached_key_is_dropped(app: Interlock) -> None:
    """The key store had handed out a key the append did not write: it reads again."""
    keys = KeyStore.open(app)
    recorder = recorder_of(app)
    chat = uuid.uuid4()
    recorder.insert_events([first(chat)])  # stored by someone else first, with no key
    assert keys.encrypt(chat, 1, "text", b'"hi"') is not None  # our key, kept for the append
    with pytest.raises(IntegrityError):
        recorder.insert_events([first(chat)])
    assert keys._row(chat)[0] is None  # what the store holds: no key


def test_a_failed_append_leaves_no_key_and_its_retry_writes_the_same_one(app: Interlock) -> None:
    """The append fails in the store (here a statement it refuses): neither the events nor
    the key are written, and the chat's key waits for the retry, which writes that key."""
    recorder = recorder_of(app)
    assert recorder.new_keys is not None
    chat = uuid.uuid4()
    recorder.new_keys.put(chat, b"r" * 32)
    keyed = recorder.keyed_statement
    recorder.keyed_statement = keyed.replace(b"SELECT * FROM", b"SELECT * FROM nowhere,")
    try:
        with pytest.raises(PersistenceError):
            recorder.insert_events([first(chat)])
    finally:
        recorder.keyed_statement = keyed
    assert stored_key(app, chat) is None and not recorder.select_events(chat)
    recorder.new_keys.put(chat, b"x" * 32)  # a retry seals again: the first key is kept
    recorder.insert_events([first(chat)])
    assert stored_key(app, chat) == b"r" * 32 and len(recorder.select_events(chat)) == 1
