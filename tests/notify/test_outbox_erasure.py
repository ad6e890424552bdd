"""Issue 40: erasure left the notification outbox in clear and mailed it once mail came back.
The outbox holds no personal data (what a row says is read from its chat when it is sent),
and nothing queued for an erased chat is sent: it is marked erased, and counted."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from interlock.cli.main import main
from interlock.client import Interrupt
from interlock.notify.store import Row
from tests.notify.test_notifications import (
    World,
    _fast_forward,
    _free_port,
    _posted,
)

SECRET = "zebulonquartz"  # the payee: the data subject, in the call's input


def _asked(world: World, payee: str) -> tuple[str, Interrupt]:
    chat = world.api("alice").chat("payAgent")
    [held] = chat.send(f"pay 500 {payee}").interrupts
    return chat.id, held


def _outbox(world: World) -> str:
    """Every row of the outbox table, as stored."""
    table = world.notifier.store.outbox
    rows = [tuple(row) for row in table.run(table.sql("SELECT * FROM {t}"), ())]
    assert rows, "the outbox is empty: nothing to look for"
    return repr(rows)


def _erase(store: str, chat_id: str) -> None:
    assert main(["audit", "erase", chat_id, "--no-rebuild", "--store", store]) == 0


def test_after_erasure_no_row_holds_the_input_and_mail_coming_back_sends_none_of_it(
    world: World, store: str, capsys: pytest.CaptureFixture[str],
) -> None:
    erased, _ = _asked(world, SECRET)
    kept, _ = _asked(world, "bob-corp")
    working = world.notifier.config
    world.notifier.config = replace(working, smtp_port=_free_port())  # mail is down
    assert world.notifier.run_once() == (8, 4)  # Slack now; the mails wait for a retry
    assert SECRET not in _outbox(world)  # nothing personal is queued, nor kept once sent
    _erase(store, erased)
    assert f"chat {erased}: 2 approver notifications not sent" in capsys.readouterr().out
    world.notifier.config = working  # mail comes back
    _fast_forward(world)
    sent_before = len(world.slack)
    world.notifier.run_once()
    assert sorted(to for to, _ in world.mailbox.mails) == [["tina@acme.test"], ["tom@acme.test"]]
    assert all(kept in mail.get_content() for _, mail in world.mailbox.mails)
    after = world.slack[sent_before:]
    assert [method for method, _ in after] == ["chat.update", "chat.update"]  # struck out
    assert all(SECRET not in json.dumps(args) and "withdrawn" in args["text"]
               for _, args in after)
    assert SECRET not in _outbox(world)
    assert world.notifier.store.counts()["erased"] == 2
    scraped = world.client.get("/metrics", headers={"Authorization": "Bearer key-root"}).text
    assert "interlock_notifications_erased 2.0" in scraped


def test_a_notifier_behind_the_erasure_queues_and_sends_nothing_of_the_chat(
    world: World, store: str,
) -> None:
    erased, _ = _asked(world, SECRET)
    _erase(store, erased)  # erased before the notifier read the call
    queued, _ = world.notifier.run_once()
    assert queued == 5  # two mails, two Slack messages, one update: all of an erased chat
    assert world.mailbox.mails == [] and _posted(world) == []
    assert not [args for method, args in world.slack if method == "chat.update"]
    assert world.notifier.store.counts() == {"erased": 4, "sent": 1}  # the update: no one
    assert SECRET not in _outbox(world)


def test_rows_an_older_version_queued_in_clear_are_emptied_and_never_sent(
    world: World, store: str,
) -> None:
    """Before, a row carried the call's facts with its input, sent or not."""
    erased, held = _asked(world, SECRET)
    facts = {"chat_id": erased, "ref": held.ref, "tool": "pay", "tenant": "acme",
             "input": {"amount": 500, "to": SECRET}, "input_sha256": held.input_sha256,
             "requested_by": "alice", "roles": ["treasury"], "quorum": 2, "expires_at": None,
             "link": "http://console.test"}
    outbox = world.notifier.store
    outbox.queue([Row("0:email:tina", "acme", "email", erased, held.ref, "tina@acme.test",
                      facts, 0),
                  Row("0:slack:UTOM", "acme", "slack", erased, held.ref, "UTOM", facts, 0)])
    [slack] = [r for r in outbox.due() if r.kind == "slack"]
    outbox.sent(slack, {"channel": "UTOM", "ts": "1.0", "facts": facts})
    assert SECRET in _outbox(world)
    _erase(store, erased)
    assert SECRET not in _outbox(world)
    assert outbox.due() == [] and outbox.counts() == {"erased": 1, "sent": 1}
    assert world.notifier.deliver_due() == 0 and world.mailbox.mails == []
    assert outbox.receipts(erased, held.ref, "slack") == [
        {"channel": "UTOM", "ts": "1.0", "facts": {k: v for k, v in facts.items()
                                                   if k != "input"}}]
