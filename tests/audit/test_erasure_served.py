"""Erasure as users run Interlock: `interlock serve` encrypts personal data, the CLI erases it."""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from psycopg import sql

from interlock.cli.main import main
from interlock.client import ChatErasedError, Client
from tests.api.server import ServeProcess
from tests.audit.test_checkpoints import keys  # noqa: F401 - the fixture
from tests.audit.test_export import standalone
from tests.conftest import PG_URL

SECRET = "zebulonquartz"  # the data subject's name, in every kind of personal field
SERVED = {"INTERLOCK_API_KEYS": "", "INTERLOCK_API_KEYS_FILE": "", "INTERLOCK_SECRET": "served"}


def every_row(store: str) -> dict[str, str]:
    """The text of every row of each table of the store: events, views, keys, logs."""
    parts = urlsplit(store)
    if parts.scheme.startswith("postgres"):
        schema = parse_qs(parts.query)["schema"][0]
        with psycopg.connect(PG_URL) as conn:
            names = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,))]
            rows = [conn.execute(sql.SQL("SELECT * FROM {}").format(
                sql.Identifier(schema, name))).fetchall() for name in names]
    else:
        with closing(sqlite3.connect(parts.path)) as lite:
            names = [r[0] for r in lite.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
            rows = [lite.execute(f'SELECT * FROM "{name}"').fetchall() for name in names]
    assert any("events" in name for name in names)
    return {name: repr(found) for name, found in zip(names, rows, strict=True)}


def _served_cycle(url: str) -> str:
    """A transfer to the subject, approved with feedback naming them; the chat's id."""
    with Client(url) as dev:
        chat = dev.chat("bankingAgent", metadata={"customer": SECRET})
        [approval] = chat.send(f"Transfer $50 to {SECRET}").interrupts
        done = chat.resume(respond=[approval.respond({"approved": True,
                                                      "feedback": f"ok for {SECRET}"})])
        assert done.finish_reason == "stop"
        assert SECRET in str(chat.state())  # readable through the API while the key lives
        return chat.id


def test_served_chats_are_encrypted_and_erasure_leaves_no_plaintext(
    store: str, keys: tuple[str, str], tmp_path: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    for name, value in SERVED.items():
        monkeypatch.setenv(name, value)
    server = ServeProcess("--store", store, env=SERVED)
    try:
        chat_id = _served_cycle(server.url)
        with Client(server.url) as dev:  # a list read waits until the views have the cycle
            assert SECRET in str(dev.decisions(chat_id=chat_id))
        before = every_row(store)
        [events_table] = [t for t in before if t in ("interlock_events", "stored_events")]
        assert chat_id.replace("-", "") in before[events_table].replace("-", "")
        assert SECRET not in before[events_table]  # encrypted at rest from the first event
        assert SECRET in str(before)  # the views hold the plaintext they were built from
        assert main(["audit", "erase", chat_id, "--store", store]) == 0
        with Client(server.url) as dev:
            assert SECRET not in str(dev.decisions(chat_id=chat_id))  # views rebuilt
            with pytest.raises(ChatErasedError):  # its chat cache still held the plaintext
                dev.open_chat(chat_id).send("What was my last transfer?")
    finally:
        server.stop()
    assert [t for t, rows in every_row(store).items() if SECRET in rows] == []
    assert main(["verify", "--all", "--store", store]) == 0
    events, decisions = tmp_path / "events.jsonl", tmp_path / "decisions.jsonl"
    assert main(["audit", "export", "--format", "events", "-o", str(events), "--key", keys[0],
                 "--store", store]) == 0
    assert main(["audit", "export", "--format", "jsonl", "-o", str(decisions),
                 "--store", store]) == 0
    assert standalone(str(events), "--public-key", keys[1]) == (0, "export verifies\n")
    assert main(["verify", "--all", "--public-key", keys[1], "--store", store]) == 0
    assert chat_id in events.read_text() and chat_id in decisions.read_text()
    assert SECRET not in events.read_text() + decisions.read_text()
    assert SECRET not in "".join(server.log) + caplog.text + capsys.readouterr().out
