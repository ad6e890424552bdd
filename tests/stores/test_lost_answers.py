"""An append whose answer was lost with its connection: retried, it is found committed."""

from __future__ import annotations

import pytest
from eventsourcing.persistence import IntegrityError

from interlock.bootstrap import build_service
from interlock.domain import Chat
from interlock.stores.groupcommit import Append
from interlock.stores.postgres import InterlockPostgresRecorder

pytestmark = pytest.mark.postgres


def test_a_retry_of_an_append_already_committed_answers_its_ids(pg_store: str) -> None:
    app = build_service(pg_store)
    recorder = app.recorder
    assert isinstance(recorder, InterlockPostgresRecorder)
    chat = Chat.start("ops", actor="a", tenant="t")
    chat.send_message("one", actor="a")
    events = [app.mapper.to_stored_event(e) for e in chat.collect_events()]
    committed = recorder.insert_events(events)  # the first attempt: its answer never came
    retried = Append(events, sent=True)
    recorder._flush_retrying([retried])  # the retry of that same flush
    assert (retried.ids, retried.error) == (list(committed), None)
    app.close()


def test_a_retry_refused_by_other_events_is_still_a_conflict(pg_store: str) -> None:
    app = build_service(pg_store)
    recorder = app.recorder
    assert isinstance(recorder, InterlockPostgresRecorder)
    chat = Chat.start("ops", actor="a", tenant="t")
    app.commit(chat)
    mine, theirs = app.get_chat(chat.id), app.get_chat(chat.id)
    theirs.send_message("theirs", actor="b")
    app.commit(theirs)
    mine.send_message("mine", actor="a")
    retried = Append([app.mapper.to_stored_event(e) for e in mine.collect_events()], sent=True)
    recorder._flush_retrying([retried])
    assert retried.ids is None and isinstance(retried.error, IntegrityError)
    app.close()
