"""A model may emit any string: the views keep up, and a NUL in a filter is a clear 4xx."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Json

from interlock.domain import Interlock, RespondEntry
from interlock.domain.errors import InvalidRequestError
from interlock.projections import open_read_models, open_views
from interlock.projections.engine.interface import DecisionFilter, InboxFilter
from interlock.projections.backends import postgres as postgres_backend
from interlock.projections.backends.postgres import _literals
from tests.conftest import PG_URL
from tests.kit import call, make_app, run, say


@pytest.fixture(params=["script", "pipeline"])
def sent_as(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """On PostgreSQL a small batch goes as one script of statements with literals, a large
    one prepared in a pipeline: each way is tried (a limit of 0 sends every batch the second)."""
    if request.param == "pipeline":
        monkeypatch.setattr(postgres_backend, "SCRIPT_ROWS", 0)
    return str(request.param)


def test_nul_characters_from_a_model_do_not_stop_the_views(store: str, sent_as: str) -> None:
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


HOSTILE = "it's \\ \"x\" '); DROP TABLE interlock_inbox; -- \\' ü 😀"


def test_quotes_and_backslashes_reach_the_views_as_written(store: str, sent_as: str) -> None:
    """The PostgreSQL views send their rows as statements with literals: whatever a model
    or an approver writes arrives as written, never as SQL."""
    app, _, _ = make_app(store, [call(("approve", {"action": HOSTILE}, None)), say(HOSTILE)])
    read = open_read_models(app)
    try:
        chat = app.start_chat("ops", actor="alice", metadata={"note": HOSTILE})
        sent = run(app.send(chat.id, HOSTILE, actor="alice"))
        [interrupt] = sent.interrupts
        read.wait(sent.position)
        [row] = read.inbox(InboxFilter(chat_id=str(chat.id))).items
        assert row.input == {"action": HOSTILE}
        done = run(app.resume(chat.id, actor="bob", respond=[
            RespondEntry(ref=interrupt.ref, name="approve", output={"approved": True, "note": HOSTILE})]))
        read.wait(done.position)
        [decision] = read.decisions(DecisionFilter(chat_id=str(chat.id))).items
        assert decision.output == {"approved": True, "note": HOSTILE} and read.is_current()
    finally:
        read.close()
        app.close()


@pytest.mark.parametrize("conforming", ["on", "off"])
def test_literals_read_back_as_the_values_whatever_the_string_setting(conforming: str) -> None:
    values: list[Any] = [
        HOSTILE, "\\", "'", "nul \x00", -7, 2**70, True, None, uuid.uuid4(), 1.5,
        float("nan"), datetime.now(UTC), datetime(2026, 1, 2, 3, 4, 5), Json({"k": HOSTILE}),
    ]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"SET standard_conforming_strings = {conforming}")
        for value in values:
            literal = _literals({"v": value})["v"]
            row = conn.execute(f"SELECT {literal}".encode()).fetchone()
            got = row[0] if row else "no row"
            if type(value) is int:  # after a minus sign, not the start of a comment
                row = conn.execute(f"SELECT 1 -{literal}".encode()).fetchone()
                assert row is not None and row[0] == 1 - value
            want = value.obj if isinstance(value, Json) else value
            if isinstance(value, str):
                want = value.replace("\x00", "\ufffd")
            assert got == want or (value != value and got != got), (value, literal, got)
