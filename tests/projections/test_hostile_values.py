"""A model may emit any string: the views keep up, and a NUL in a filter is a clear 4xx."""

from __future__ import annotations

import pytest

from interlock.domain import Interlock, RespondEntry
from interlock.domain.errors import InvalidRequestError
from interlock.projections import open_read_models, open_views
from interlock.projections.engine.interface import DecisionFilter, InboxFilter
from tests.kit import call, make_app, run, say


def test_nul_characters_from_a_model_do_not_stop_the_views(store: str) -> None:
    app: Interlock
    app, _, _ = make_app(store, [call(("approve", {"action": "a\x00b"}, "r\x00f")), say("ok")])
    read = open_read_models(app)
    try:
        chat = app.start_chat("ops", actor="alice")
        sent = run(app.send(chat.id, "go \x00", actor="alice"))
        [interrupt] = sent.interrupts
        read.wait(sent.position)
        [row] = read.inbox(InboxFilter(chat_id=str(chat.id))).items
        assert row.input == {"action": "a\x00b"} and row.ref == interrupt.ref != "r\x00f"
        done = run(
            app.resume(
                chat.id,
                actor="bob",
                respond=[
                    RespondEntry(
                        ref=interrupt.ref, name="approve", output={"approved": True, "note": "\x00"}
                    )
                ],
            )
        )
        read.wait(done.position)
        [decision] = read.decisions(DecisionFilter(chat_id=str(chat.id))).items
        assert decision.output == {"approved": True, "note": "\x00"}
        assert read.is_current()
    finally:
        read.close()
        app.close()


def test_a_nul_in_a_filter_is_refused(store: str) -> None:
    app, _, _ = make_app(store, [])
    read = open_read_models(app)
    try:
        if "postgres" in store:
            with pytest.raises(InvalidRequestError):
                read.decisions(DecisionFilter(actor="x\x00"))
        else:
            assert read.decisions(DecisionFilter(actor="x\x00")).items == []
    finally:
        read.close()
        app.close()


def test_lag_counts_what_the_views_have_not_seen(store: str) -> None:
    app, _, _ = make_app(store, [say("hi")])
    views = open_views(app)  # no runner: nothing is applied until asked
    try:
        chat = app.start_chat("ops", actor="alice")
        run(app.send(chat.id, "hello", actor="alice"))
        assert views.lag() == 5 and not views.is_current() and not views.stopped()
        views.catch_up()
        assert views.lag() == 0 and views.is_current()
    finally:
        views.close()
        app.close()
