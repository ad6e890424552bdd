"""`interlock replay` of a tampered chat says where its chain breaks and exits non-zero."""

from __future__ import annotations

import pytest

from interlock.cli.main import main
from tests.kit import make_app, run, say
from tests.projections.tamper import EventsTable


@pytest.mark.parametrize("how", ["respaced", "cut"])
def test_replay_of_a_tampered_chat_names_the_break_and_fails(
    sqlite_store: str, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    app, _, _ = make_app(sqlite_store, [say("first"), say("second")])
    chat = app.start_chat("ops", actor="alice")
    run(app.send(chat.id, "one", actor="alice"))
    run(app.send(chat.id, "two", actor="alice"))
    app.close()
    assert main(["replay", str(chat.id), "--store", sqlite_store]) == 0
    capsys.readouterr()
    table = EventsTable(sqlite_store, chat.id)
    if how == "respaced":  # the same JSON in other bytes: the seal no longer matches
        _, state = table.records()[2]
        table.write_raw(2, state.replace(b'":', b'": '))
    else:  # an event taken out of the middle
        table.delete(3)
    assert main(["replay", str(chat.id), "--store", sqlite_store]) == 1
    err = capsys.readouterr().err
    assert f"chat {chat.id}: broken at version {2 if how == 'respaced' else 3}" in err
