"""Subscriptions are events: a rebuild (or an erasure) keeps them and sends nothing twice."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from interlock.audit import reading
from interlock.cli.main import main as cli
from interlock.domain.chat.policies import Decider
from interlock.domain.errors import ChatNotFoundError
from interlock.domain.webhooks import WebhookSubscribed, WebhookUnsubscribed, parse_id
from interlock.projections.views.webhooks import WebhooksView
from interlock.stores.erasure_keys import KeyStore
from interlock.webhooks.subscriptions import MIGRATED_BY, secret_sha256
from tests.api.agents import payer
from tests.observability.receiver import Receiver
from tests.observability.test_webhooks import FAST, Call, _transfer_cycle, running, until
from tests.webhooks.kit import hub


def _stored(service: object, hook_id: UUID) -> list[bytes]:
    return [bytes(e.state) for e in service.recorder.select_events(hook_id)]  # type: ignore[attr-defined]


def _delivered(api: Call) -> int:
    """How many deliveries the server lists, if all of them are marked delivered (else -1)."""
    listed = api("root", "GET", "/v1/webhooks/deliveries").json()["items"]
    return len(listed) if all(d["status"] == "delivered" for d in listed) else -1


def test_a_rebuild_under_a_live_server_keeps_subscriptions_and_resends_nothing(
    store: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver = Receiver()
    receiver.up()
    monkeypatch.setenv("INTERLOCK_STORE", store)
    with running(store, FAST) as (api, service, views):
        made = api("root", "POST", "/v1/webhooks", json={"url": receiver.url}).json()
        receiver.secret = made["secret"]
        _transfer_cycle(api, "dana", "bob")
        until(lambda: _delivered(api) == 4)  # received, and marked so: not just received

        # The subscription is in the log, sealed: who, which URL, and no secret but its hash.
        hook_id = parse_id(made["id"])
        assert hook_id is not None
        hook = service.webhooks.get(hook_id)
        assert hook is not None and isinstance(hook.subscribed, WebhookSubscribed)
        assert (hook.subscribed.actor, hook.subscribed.url, hook.tenant) == (
            "root", receiver.url, "acme")
        assert hook.subscribed.secret_sha256 == secret_sha256(made["secret"])
        assert not any(made["secret"].encode() in s for s in _stored(service, hook_id))

        assert cli(["projections", "rebuild", "all"]) == 0
        listed = api("root", "GET", "/v1/webhooks").json()["items"]
        assert [s["id"] for s in listed] == [made["id"]]
        done = api("root", "GET", "/v1/webhooks/deliveries").json()["items"]
        assert len(done) == 4 and {d["status"] for d in done} == {"delivered"}

        _transfer_cycle(api, "dana", "bob")  # the rebuilt subscription still delivers
        until(lambda: _delivered(api) == 8)  # a row still "sending" would outlive the prune
        views.view(WebhooksView).prune(datetime.now(UTC) + timedelta(days=1))
        assert cli(["projections", "rebuild", "webhooks"]) == 0
        assert api("root", "GET", "/v1/webhooks/deliveries").json()["items"] == []  # pruned

        assert api("root", "DELETE", f"/v1/webhooks/{made['id']}").status_code == 204
        gone = service.webhooks.get(hook_id)
        assert gone is not None and isinstance(gone.removed, WebhookUnsubscribed)
        assert gone.removed.actor == "root"
        assert cli(["projections", "rebuild", "all"]) == 0
        assert api("root", "GET", "/v1/webhooks").json()["items"] == []
    receiver.down()
    ids = [i for i, _ in receiver.received]
    assert len(ids) == len(set(ids)) == 8  # nothing sent twice, by either rebuild


def test_erasure_redacts_the_chats_notifications_and_keeps_every_subscription(
    sqlite_store: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """D23: a withdrawal's reason, queued for a receiver that is down, goes with the erasure;
    D18: the rebuild that follows keeps every tenant's subscription and the outbox."""
    monkeypatch.setenv("INTERLOCK_STORE", sqlite_store)
    marker = "call Mrs Jane Roe on +44 20 7946 0958"
    with hub(sqlite_store, agents=[payer]) as h:
        h.service.protect_personal_data(KeyStore.open(h.service))
        acme = h.subs.subscribe("acme", "http://hooks.example.com/in", "hooks.example.com",
                                ["interrupt.decided"], "root")
        globex = h.subs.subscribe("globex", "http://hooks.example.org/in", "hooks.example.org",
                                  ["turn.finished"], "gina")
        chat = h.service.start_chat("payAgent", actor="alice", tenant="acme")
        held = asyncio.run(h.service.send(chat.id, "pay 500 bob-corp", actor="alice"))
        asyncio.run(h.service.withdraw(chat.id, [held.interrupts[0].ref], reason=marker,
                                       decider=Decider("root", frozenset({"admin"}))))
        h.current()
        assert marker in str(h.hooks.dump())
        assert cli(["audit", "erase", str(chat.id)]) == 0  # and rebuild every view
        h.current()
        rows = [r for r in h.hooks.dump() if r["kind"] == "outbox"]
        assert len(rows) == 1 and marker not in str(rows) and "[erased]" in str(rows)
        assert [s.id for s in h.hooks.subscriptions("acme")] == [acme.id]
        assert [s.id for s in h.hooks.subscriptions("globex")] == [globex.id]
        assert h.hooks.secret(acme.id) == acme.secret


def test_subscriptions_of_the_old_table_are_recorded_once(sqlite_store: str) -> None:
    """The table subscriptions lived in before they were events is migrated at start."""
    with hub(sqlite_store) as h:
        h.hooks.transact(lambda: h.hooks.store.run(
            "CREATE TABLE {webhook_subs} (id text PRIMARY KEY, tenant text NOT NULL,"
            " url text NOT NULL, secret text NOT NULL, events text NOT NULL,"
            " created_at {ts} NOT NULL)", {}))
        old = "sub_" + "ab" * 16
        h.hooks.transact(lambda: h.hooks.store.run(
            "INSERT INTO {webhook_subs} VALUES (%(i)s, 'acme', 'http://hooks.example.com/',"
            " 'whsec_old', '|turn.finished|', %(at)s)",
            {"i": old, "at": h.hooks.store.encode_ts(datetime.now(UTC))}))
        assert h.subs.migrate() == 1
        assert h.subs.migrate() == 0  # the table is gone; nothing is recorded twice
        h.current()
        [sub] = h.hooks.subscriptions("acme")
        assert (sub.id, sub.url, sub.events) == (old, "http://hooks.example.com/",
                                                 ["turn.finished"])
        assert h.hooks.secret(old) == "whsec_old"
        recorded = h.service.webhooks.get(UUID(hex="ab" * 16))
        assert recorded is not None and recorded.subscribed.actor == MIGRATED_BY
        assert recorded.subscribed.secret_sha256 == hashlib.sha256(b"whsec_old").hexdigest()


def test_a_subscriptions_stream_verifies_and_is_no_chat(store: str) -> None:
    """Its events are chained like a chat's (verify covers them); as a chat it does not exist."""
    with hub(store) as h:
        made = h.subs.subscribe("acme", "https://hooks.example.com/in", "hooks.example.com",
                                ["turn.finished"], "root")
        assert h.subs.unsubscribe("acme", made.id, "root")
        assert not h.subs.unsubscribe("acme", made.id, "root")  # removed once
        hook_id = parse_id(made.id)
        assert hook_id is not None
        assert reading.verifier(h.service, h.service.sealer.keys).verify_all() == []
        with pytest.raises(ChatNotFoundError):
            h.service.get_chat(hook_id)
        with pytest.raises(ChatNotFoundError):
            h.service.chat_events(hook_id)
