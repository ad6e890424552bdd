"""A pass applies the events this process's commits handed over without reading the log, only
when they are every event since the views' position: a gap (another process's append) or
an erased chat sends it to the log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels, open_views
from interlock.projections.views.chats import ChatFilter
from interlock.stores.erasure_keys import KeyStore
from tests.projections.conftest import dumps, rebuilt
from tests.projections.flows import app_for, banking_flows

pytestmark = pytest.mark.anyio


@pytest.fixture
def kept(app: Interlock) -> Iterator[SqlReadModels]:
    """Views caught up by hand, handed each commit of `app` as the live runner hands them."""
    views = open_views(app)
    app.commit_listeners.append(views.committed)
    yield views
    app.commit_listeners.remove(views.committed)
    views.close()


def count_log_reads(app: Interlock, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    select = app.recorder.select_notifications

    def counting(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return select(*args, **kwargs)

    monkeypatch.setattr(app.recorder, "select_notifications", counting)
    return reads


async def test_a_pass_over_this_process_s_commits_does_not_read_the_log(
    app: Interlock, kept: SqlReadModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept.catch_up()
    reads = count_log_reads(app, monkeypatch)
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
    await app.send(chat.id, "transfer $50 to savings", actor="alice")
    kept.catch_up()
    assert reads == []
    assert [c.chat_id for c in kept.chats(ChatFilter(), 10).items] == [str(chat.id)]
    assert dumps(kept) == rebuilt(app)


async def test_another_process_s_append_between_ours_is_read_from_the_log(
    app: Interlock, kept: SqlReadModels, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = app_for(store)  # a second process on the store: its commits are not handed over
    try:
        kept.catch_up()
        reads = count_log_reads(app, monkeypatch)
        mine = app.start_chat("bankingAgent", actor="alice", tenant="bank")
        theirs = other.start_chat("bankingAgent", actor="bob", tenant="bank")
        await app.send(mine.id, "transfer $50 to savings", actor="alice")
        kept.catch_up()
        assert reads  # the gap sent the pass to the log
        listed = {c.chat_id for c in kept.chats(ChatFilter(), 10).items}
        assert listed == {str(mine.id), str(theirs.id)}
        assert dumps(kept) == rebuilt(app)
    finally:
        other.close()


async def test_a_kept_event_of_a_chat_erased_before_the_pass_is_read_from_the_log(
    app: Interlock, kept: SqlReadModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    readable = {"yes": True}
    monkeypatch.setattr(app.mapper, "reads_as_committed", lambda event: readable["yes"])
    kept.catch_up()
    reads = count_log_reads(app, monkeypatch)
    await banking_flows(app)
    readable["yes"] = False  # as once a chat's key is destroyed: the log reads otherwise now
    kept.catch_up()
    assert reads
    assert dumps(kept) == rebuilt(app)


async def test_another_process_s_chats_have_their_keys_read_together(
    app: Interlock, kept: SqlReadModels, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoding another process's events takes their chats' keys: the pass reads them in one
    query, not one a chat (the views' leader did, for every chat of the other workers)."""
    app.protect_personal_data(KeyStore.open(app))  # as served: personal fields encrypted
    backend = app.mapper.personal.backend  # type: ignore[union-attr]
    other = app_for(store)
    other.protect_personal_data(KeyStore.open(other))
    try:
        kept.catch_up()
        theirs = [other.start_chat("bankingAgent", actor="bob", tenant="bank") for _ in range(3)]
        for chat in theirs:
            await other.send(chat.id, "transfer $50 to savings", actor="bob")
        alone: list[Any] = []
        together: list[set[Any]] = []
        get, get_many = backend.get, backend.get_many
        monkeypatch.setattr(backend, "get", lambda chat_id: alone.append(chat_id) or get(chat_id))
        monkeypatch.setattr(backend, "get_many", lambda chat_ids: together.append(
            set(chat_ids)) or get_many(chat_ids))
        kept.catch_up()
        assert alone == []
        assert len(together) == 1 and together[0] == {chat.id for chat in theirs}
        assert dumps(kept) == rebuilt(app)
    finally:
        other.close()
