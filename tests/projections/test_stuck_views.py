"""A view stuck on an event names the view and the event, never the row's data (D25), and
only the lists that read it wait for it (issue 25: approvers kept their inbox)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from fastapi.testclient import TestClient

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.domain import Interlock
from interlock.domain.chat.events import UserMessageSent
from interlock.projections import READ_MODELS, ReadModel, SqlReadModels, open_read_models
from interlock.projections.engine.sql import SqlView

pytestmark = pytest.mark.anyio

CARD = "4111-1111-1111-1111"  # personal data in a message: erasure must be able to remove it
KEYS = {"k-bob": {"id": "bob", "tenant": "bank", "roles": ["approver"]}}
BOB = {"Authorization": "Bearer k-bob"}


class CardView(SqlView):
    """A view that refuses a message carrying a card number, quoting it as a database does."""

    view_name = "cards"
    tables = ("cards",)
    ddl = ("CREATE TABLE IF NOT EXISTS {cards} (chat_id text PRIMARY KEY)",)
    dump_sql = "SELECT chat_id FROM {cards} ORDER BY chat_id"


class CardProjection(Projection[CardView]):
    name = "cards"

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Other events write nothing."""

    @process_event.register
    def _message(self, e: UserMessageSent, tracking: Tracking) -> None:
        if CARD in e.text:
            raise ValueError(f"duplicate key value violates a constraint: Key (text)=({e.text})")


WITH_CARDS = (*READ_MODELS, ReadModel(CardView, CardProjection))


async def _stuck(app: Interlock, server: SqlReadModels) -> int:
    """A pending transfer whose message the cards view cannot apply; its position."""
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
    result = await app.send(chat.id, f"transfer $20 to dave, card {CARD}", actor="alice")
    assert result.interrupts  # the inbox has it
    head = app.recorder.max_notification_id() or 0
    with pytest.raises(TimeoutError):
        server.wait(head, timeout=5)  # at once, once the view is stuck
    [stuck] = server.stuck()
    return stuck.notification_id


async def test_a_stuck_view_names_the_view_and_the_event_but_not_the_rows_data(
    app: Interlock, store: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = open_read_models(app, read_models=WITH_CARDS)
    try:
        position = await _stuck(app, server)
        ready = TestClient(make_app(app, server)).get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["stuck"] == [{
            "view": "cards", "notification_id": position,
            "topic": ready.json()["stuck"][0]["topic"], "error": "ValueError", "attempts": 1}]
        assert ready.json()["stuck"][0]["topic"].endswith("UserMessageSent")
        assert CARD not in ready.text
        told = [r.getMessage() for r in caplog.records if "cards" in r.getMessage()]
        assert any(str(position) in m and "ValueError" in m for m in told)
        assert CARD not in caplog.text  # messages, and tracebacks too
    finally:
        server.close()


async def test_a_stuck_view_fails_only_the_lists_that_read_it(app: Interlock, store: str) -> None:
    server = open_read_models(app, read_models=WITH_CARDS)
    try:
        position = await _stuck(app, server)
        http = TestClient(make_app(app, server, AuthConfig.from_mapping(KEYS)))
        inbox = http.get("/v1/interrupts", headers=BOB)
        assert inbox.status_code == 200
        assert [r["tool"] for r in inbox.json()["items"]] == ["userApproval"]
        assert http.get("/v1/chats", headers=BOB).status_code == 200
        assert http.get("/v1/decisions", headers=BOB).status_code == 200
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="cards"):
            server.wait(position, timeout=5, views=("cards",))
        assert time.monotonic() - started < 1  # a stuck view is no reason to wait
    finally:
        server.close()
