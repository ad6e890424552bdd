"""Issue 25, D31: an erased chat's pending calls leave the inbox, and their end is recorded.

Once a chat's key is destroyed nothing carrying personal data can be written to it (a
vote, the model's answer, even `TurnFinished`), so a call still pending then could never
be decided, and the sweeper's expiry (which continues the turn) was refused on every
sweep: the call stayed in the inbox for ever and its expiry was never recorded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from uuid import UUID

import pytest

from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain import ApproveEntry, Decider, Interlock
from interlock.domain.chat.approval_events import InterruptExpired, InterruptWithdrawn
from interlock.domain.errors import ChatErasedError
from interlock.projections import SqlReadModels, open_views
from interlock.projections.interface import DecisionFilter
from interlock.projections.views.inbox import InboxFilter
from interlock.stores.erasure_keys import KeyStore
from interlock.sweeper import Sweeper
from tests.kit import run
from tests.projections.test_sweeper import TTL, _agents


@pytest.fixture
def payer(store: str) -> Iterator[tuple[Interlock, KeyStore, SqlReadModels]]:
    """The payer agent (its `pay` needs approval within TTL), its key store and views."""
    app = build_service(store, _agents())
    keys = KeyStore.open(app)
    app.protect_personal_data(keys)
    views = open_views(app)
    yield app, keys, views
    views.close()
    app.close()


def _held(app: Interlock) -> UUID:
    chat = app.start_chat("payer", actor="alice", tenant="t1")
    assert run(app.send(chat.id, "pay", actor="alice")).finish_reason == "interrupted"
    return chat.id


def _inbox(views: SqlReadModels, chat_id: UUID) -> list[str]:
    views.catch_up()
    return [r.ref for r in views.inbox(InboxFilter(chat_id=str(chat_id)), 10, None).items]


def test_erasing_a_chat_withdraws_its_pending_calls_first(
    payer: tuple[Interlock, KeyStore, SqlReadModels], store: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    app, _, views = payer
    chat_id, other = _held(app), _held(app)
    assert _inbox(views, chat_id) == ["p1"]
    assert main(["audit", "erase", str(chat_id), "--no-rebuild", "--store", store]) == 0
    assert "withdrew its pending calls as interlock:erasure: p1" in capsys.readouterr().out
    events = app.chat_events(chat_id)
    withdrawn = [e for e in events if isinstance(e, InterruptWithdrawn)]
    assert [(e.ref, e.actor) for e in withdrawn] == [("p1", "interlock:erasure")]
    # the turn ends, then the erasure begins (no fork of the chat from there on)
    assert [type(e).__name__ for e in events[-2:]] == ["TurnFinished", "ErasureBegun"]
    assert _inbox(views, chat_id) == [] and _inbox(views, other) == ["p1"]
    rows = views.decisions(DecisionFilter(chat_id=str(chat_id)), 10, None).items
    assert [(r.kind, r.actor) for r in rows] == [("withdraw", "interlock:erasure")]
    with pytest.raises(ChatErasedError):  # nobody can decide it any more
        run(app.resume(chat_id, votes=[ApproveEntry(ref="p1", name="pay")], actor="tom",
                       decider=Decider("tom", frozenset({"treasury"}))))
    assert main(["audit", "erase", str(chat_id), "--no-rebuild", "--store", store]) == 0
    assert len(app.chat_events(chat_id)) == len(events)  # erasing again writes nothing


def test_the_sweeper_records_the_expiry_of_a_chat_erased_with_a_call_pending(
    payer: tuple[Interlock, KeyStore, SqlReadModels],
) -> None:
    """A chat erased before erasure closed its pending calls (or in a race with a new
    turn): its expiry is recorded alone, exactly once, and the inbox lets the call go."""
    app, keys, views = payer
    chat_id, other = _held(app), _held(app)
    keys.erase(chat_id)  # the key only, as an erasure did before
    time.sleep(TTL.total_seconds() + 0.05)
    views.catch_up()
    sweeper = Sweeper(app, views)
    assert sweeper.sweep(datetime.now(UTC)) >= 2  # both expire; the other chat goes on
    expired = [e for e in app.chat_events(chat_id) if isinstance(e, InterruptExpired)]
    assert [e.ref for e in expired] == ["p1"]
    assert _inbox(views, chat_id) == [] and _inbox(views, other) == []
    assert sweeper.sweep(datetime.now(UTC)) == 0
    assert len([e for e in app.chat_events(chat_id) if isinstance(e, InterruptExpired)]) == 1


def test_the_sweeper_leaves_an_erasing_chats_call_until_its_key_goes_then_expires_it_alone(
    payer: tuple[Interlock, KeyStore, SqlReadModels],
) -> None:
    """A fork being erased keeps its pending calls (erase closes only the chat it was asked
    for): while its key lives its expiry is not recorded, since the turn would go on and
    tell the model; once the key is gone the expiry is recorded alone."""
    app, keys, views = payer
    chat_id = _held(app)
    app.begin_erasure(chat_id, actor="operator")
    time.sleep(TTL.total_seconds() + 0.05)
    views.catch_up()
    sweeper, before = Sweeper(app, views), app.chat_events(chat_id)
    assert sweeper.sweep(datetime.now(UTC)) == 0
    assert app.chat_events(chat_id) == before
    keys.erase(chat_id)
    assert sweeper.sweep(datetime.now(UTC)) == 1
    after = app.chat_events(chat_id)  # the same events (read back erased), and the expiry
    assert [e.chain for e in after[:-1]] == [e.chain for e in before]
    assert isinstance(after[-1], InterruptExpired)
    assert _inbox(views, chat_id) == []


def test_only_a_destroyed_key_counts_as_erased_not_a_chat_kept_in_plaintext(
    store: str,
) -> None:
    """A chat begun before protection has no key either; its refused expiry (a lost race)
    must not be recorded alone as if it were erased: its turn would never go on."""
    app = build_service(store, _agents())
    try:
        plain = _held(app)
        keys = KeyStore.open(app)
        app.protect_personal_data(keys)
        erased, kept = _held(app), _held(app)
        keys.erase(erased)
        views = open_views(app)
        try:
            sweeper = Sweeper(app, views)
            assert [sweeper._erased(c) for c in (plain, erased, kept)] == [False, True, False]
        finally:
            views.close()
    finally:
        app.close()
