"""Issue 40: one admin's typo stopped every tenant's notifications. An address is checked
when it is set; a row that cannot be sent is given up on its own and counted; the notifier's
thread goes on past a bad row, even one recorded by an older version and due first."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from interlock.api.auth import AuthConfig
from interlock.domain.channels import EmailChannel
from interlock.notify import messages
from interlock.notify.notifier import Notifier
from tests.api.conftest import KEYS
from tests.notify.test_notifications import (
    EMAILS,
    World,
    _fast_forward,
    _held,
)

GUS = {"key-gus": {"id": "gus", "tenant": "globex", "roles": ["treasury"]}}  # globex's approver


@pytest.mark.parametrize("typo", [
    "ted@acme.test, spy@evil.test", "ted@acme.test\r\nBcc: spy@evil.test",
    "Ted <ted@acme.test>",
])
def test_an_address_that_is_not_exactly_one_is_a_422_naming_it(world: World, typo: str) -> None:
    answer = world.client.put("/v1/channels/email", json={"addresses": {**EMAILS, "ted": typo}},
                              headers={"Authorization": "Bearer key-root"})
    assert answer.status_code == 422
    [error] = answer.json()["error"]["details"]["errors"]
    assert error["loc"] == ["body", "addresses", "ted"] and repr(typo) in error["msg"]
    channels = world.client.get("/v1/channels", headers={"Authorization": "Bearer key-root"})
    assert channels.json()["items"][0]["config"]["addresses"] == EMAILS  # nothing written


def _two_tenants(world: World, tina: str) -> Notifier:
    """acme's mail as an older version recorded it (tina's address unchecked), globex's
    mailing gus; a call held in each, acme's first; a notifier that knows gus."""
    service = world.notifier.service
    service.channels.remove("acme", "slack", actor="root")
    service.channels.set("acme", "email", EmailChannel.model_construct(
        addresses={**EMAILS, "tina": tina}), actor="root")
    service.channels.set("globex", "email", EmailChannel(addresses={"gus": "gus@globex.test"}),
                        actor="root")
    _held(world)
    assert world.api("eve").chat("payAgent").send("pay 500 bob-corp").interrupts
    return Notifier(service, AuthConfig.from_mapping({**KEYS, **GUS}), replace(
        world.notifier.config, slack_token=None, poll_interval=0.01))


def _counted_passes(notifier: Notifier, monkeypatch: pytest.MonkeyPatch) -> threading.Semaphore:
    """Released at the end of each pass of the notifier's thread, however it ended."""
    passes = threading.Semaphore(0)
    run_once = notifier.run_once

    def counted() -> tuple[int, int]:
        try:
            return run_once()
        finally:
            passes.release()

    monkeypatch.setattr(notifier, "run_once", counted)
    return passes


def test_a_recorded_address_with_a_line_break_due_first_stops_no_one_after_a_restart(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = _two_tenants(world, "tina@acme.test\r\nBcc: spy@evil.test")
    assert before.queue_new() == 3  # then the process stops; tina's row is due first
    assert sorted(before.store.due()[0].id.split(":")[1:]) == ["email", "tina"]
    restarted = Notifier(before.service, before.auth, before.config)
    passes = _counted_passes(restarted, monkeypatch)
    restarted.start()
    try:
        assert passes.acquire(timeout=30) and passes.acquire(timeout=30)  # it lives on
    finally:
        restarted.stop()
    assert sorted(to for to, _ in world.mailbox.mails) == [["gus@globex.test"],
                                                           ["tom@acme.test"]]
    ready = world.client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["notifications_failed"] == 1
    scraped = world.client.get("/metrics", headers={"Authorization": "Bearer key-root"}).text
    assert "interlock_notifications_failed 1.0" in scraped
    assert "interlock_notifications_waiting 0.0" in scraped


def test_a_row_that_keeps_failing_is_given_up_after_its_attempts_and_the_rest_go_out(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    notifier = _two_tenants(world, "tina@acme.test")
    notifier.config = replace(notifier.config, max_attempts=3)
    mail = messages.email

    def broken_for_tina(f: dict[str, Any], to: str, sender: str) -> Any:
        if to == "tina@acme.test":
            raise RuntimeError("a bug met by this row alone")
        return mail(f, to, sender)

    monkeypatch.setattr(messages, "email", broken_for_tina)
    assert notifier.run_once() == (3, 2)
    for _ in range(2):
        _fast_forward(world)
        assert notifier.run_once() == (0, 0)
    assert notifier.store.counts() == {"sent": 2, "failed": 1}  # three attempts, then given up
    _fast_forward(world)
    assert notifier.run_once() == (0, 0) and notifier.store.counts()["failed"] == 1


def test_a_failed_pass_is_logged_and_the_thread_goes_on(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    notifier = _two_tenants(world, "tina@acme.test")
    queue_new = notifier.queue_new
    failures = iter([RuntimeError("a bug outside any row")])

    def failing_once() -> int:
        for failure in failures:
            raise failure
        return queue_new()

    monkeypatch.setattr(notifier, "queue_new", failing_once)
    passes = _counted_passes(notifier, monkeypatch)
    notifier.start()
    try:
        assert passes.acquire(timeout=30) and passes.acquire(timeout=30)
    finally:
        notifier.stop()
    assert "notification pass failed unexpectedly" in caplog.text
    assert len(world.mailbox.mails) == 3
