"""`interlock replay` shows model and client text without letting it drive the terminal."""

from __future__ import annotations

import unicodedata

import pytest

from interlock.cli.main import main
from tests.kit import make_app, run, say

HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202egnp.exe\r\nforged line"


def test_replay_escapes_control_and_bidi_characters(
    sqlite_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    app, _, _ = make_app(sqlite_store, [say(HOSTILE)])
    chat = app.start_chat("ops", actor="mallory\x1b[1A")
    run(app.send(chat.id, HOSTILE, actor="mallory\x1b[1A"))
    app.close()
    assert main(["replay", str(chat.id), "--store", sqlite_store]) == 0
    out = capsys.readouterr().out
    hidden = {ch for ch in out if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf")}
    assert hidden == set()
    assert "\\u001b" in out and "\\u202e" in out and "mallory\\u001b[1A" in out
    assert not any(line.startswith("forged line") for line in out.splitlines())
