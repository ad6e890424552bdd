"""Approvers told by email and Slack, deciding from Slack: a local SMTP server (aiosmtpd) and a
local fake of Slack's Web API that the real `slack-sdk` client talks to over HTTP."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from datetime import time as clock
from email import message_from_bytes, policy
from typing import Any
from urllib.parse import urlencode
from uuid import uuid4
from zoneinfo import ZoneInfo

import httpx
import pytest
from aiosmtpd.controller import Controller
from fastapi import FastAPI, Request
from slack_sdk.signature import SignatureVerifier

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.client import ChatNotFoundError, Client, Interrupt
from interlock.domain.channels import EmailChannel, QuietHours, channels_id
from interlock.domain.errors import ConcurrencyError
from interlock.notify.config import NotifyConfig
from interlock.notify.gauges import NotifyGauges
from interlock.notify.notifier import Notifier
from interlock.projections import open_read_models
from interlock.stores.erasure_keys import KeyStore
from tests.api.agents import AGENTS, PAID
from tests.api.conftest import KEYS
from tests.api.server import ThreadServer

SIGNING = "slack-signing-secret-of-the-tests"
EMAILS = {"tina": "tina@acme.test", "tom": "tom@acme.test", "alice": "alice@acme.test"}
USERS = {"UTINA": "tina", "UTOM": "tom", "UALICE": "alice"}


@dataclass
class Mailbox:
    mails: list[tuple[list[str], Any]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.mails.append((list(envelope.rcpt_tos),
                           message_from_bytes(envelope.content, policy=policy.default)))
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fake_slack() -> tuple[FastAPI, list[tuple[str, dict[str, Any]]]]:
    """Slack's Web API as far as the notifier uses it: what it was sent, in order."""
    calls: list[tuple[str, dict[str, Any]]] = []
    app = FastAPI()

    @app.post("/api/{method}")
    async def api(method: str, request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            args = json.loads(raw)
        except ValueError:
            args = dict(httpx.QueryParams(raw.decode()))
        calls.append((method, args))
        ts = f"{time.time():.6f}"
        return {"ok": True, "channel": args.get("channel", "D1"), "ts": ts}

    return app, calls


@dataclass
class World:
    client: httpx.Client
    notifier: Notifier
    mailbox: Mailbox
    slack: list[tuple[str, dict[str, Any]]]
    url: str
    clients: dict[str, Client] = field(default_factory=dict)

    def api(self, who: str) -> Client:
        if who not in self.clients:
            self.clients[who] = Client(self.url, api_key=f"key-{who}")
        return self.clients[who]

    def click(self, user: str, action: str, value: str, *, at: float | None = None,
              signed: bool = True) -> httpx.Response:
        payload = {"type": "block_actions", "user": {"id": user}, "trigger_id": "T1",
                   "actions": [{"action_id": action, "value": value}]}
        return self.callback(payload, at=at, signed=signed)

    def callback(self, payload: dict[str, Any], *, at: float | None = None,
                 signed: bool = True, body: bytes | None = None) -> httpx.Response:
        body = body or urlencode({"payload": json.dumps(payload)}).encode()
        ts = str(int(at if at is not None else time.time()))
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if signed:
            headers["X-Slack-Request-Timestamp"] = ts
            headers["X-Slack-Signature"] = SignatureVerifier(SIGNING).generate_signature(
                timestamp=ts, body=body) or ""
        return self.client.post("/v1/integrations/slack/actions", content=body, headers=headers)

    def command(self, user: str, text: str = "acme") -> httpx.Response:
        """`user` types `/interlock-link <text>` in Slack."""
        body = urlencode({"command": "/interlock-link", "text": text, "user_id": user,
                          "trigger_id": uuid4().hex})  # Slack's own differ, as here
        return self.callback({}, body=body.encode())

    def link(self, user: str, principal: str) -> dict[str, Any]:
        """`user` asks for a code in Slack; `principal`, signed in, confirms it."""
        code = re.search(r"code is (\S+) ", self.command(user).json()["text"])
        assert code is not None
        confirmed: dict[str, Any] = self.api(principal).request(
            "POST", "/v1/channels/slack/links/confirm", json={"code": code[1]})
        return confirmed


@pytest.fixture
def world(store: str) -> Iterator[World]:
    if store.startswith("memory"):
        pytest.skip("notifications keep their outbox in a SQL store")
    mailbox = Mailbox()
    smtp = Controller(mailbox, hostname="127.0.0.1", port=_free_port())
    smtp.start()
    slack_app, slack_calls = fake_slack()
    slack = ThreadServer(slack_app)
    service = build_service(store, AGENTS)
    service.protect_personal_data(KeyStore.open(service))  # as every served process does
    views = open_read_models(service)
    auth = AuthConfig.from_mapping(KEYS)
    config = NotifyConfig(smtp_host="127.0.0.1", smtp_port=smtp.port, smtp_starttls=False,
                          slack_token="xoxb-test", slack_base_url=f"{slack.url}/api/",
                          slack_signing_secret=SIGNING, console_url="http://console.test")
    notifier = Notifier(service, auth, config)
    app = make_app(service, views, auth)
    app.state.callbacks = notifier.callbacks()  # as bootstrap wires it
    app.state.notifier = notifier
    app.state.metrics.registry.register(NotifyGauges(notifier.store))
    server = ThreadServer(app)
    client = httpx.Client(base_url=server.url)
    world = World(client, notifier, mailbox, slack_calls, server.url)
    root = world.api("root")
    root.request("PUT", "/v1/channels/email", json={"addresses": EMAILS})
    root.request("PUT", "/v1/channels/slack", json={})
    for user, principal in USERS.items():
        world.link(user, principal)
    try:
        yield world
    finally:
        for made in world.clients.values():
            made.close()
        client.close()
        server.stop()
        views.close()
        slack.stop()
        smtp.stop()


def _held(world: World) -> tuple[str, Interrupt]:
    chat = world.api("alice").chat("payAgent")
    turn = chat.send("pay 500 bob-corp")
    assert turn.finish_reason == "interrupted"
    return chat.id, turn.interrupts[0]


def _button(chat_id: str, held: Interrupt) -> str:
    """The value the notifier puts on a message's buttons."""
    return json.dumps({"chat_id": chat_id, "ref": held.ref, "input_sha256": held.input_sha256})


def _posted(world: World) -> list[dict[str, Any]]:
    return [args for method, args in world.slack if method == "chat.postMessage"]


def test_a_held_call_tells_the_routed_people_once_by_mail_and_slack(world: World) -> None:
    chat_id, held = _held(world)
    queued, sent = world.notifier.run_once()
    assert (queued, sent) == (4, 4)
    assert sorted(to for to, _ in world.mailbox.mails) == [["tina@acme.test"], ["tom@acme.test"]]
    mail = world.mailbox.mails[0][1]
    body = mail.get_content()
    assert mail["Subject"] == "Approval needed: pay"
    assert "alice asks to run pay (treasury, 2 approvals; decide by" in body
    deadline = body.split("decide by ")[1].split(")")[0]  # as people read it, in UTC
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", deadline), deadline
    assert '"amount": 500' in body
    assert f"http://console.test/ui/chats/{chat_id}/interrupts/{held.ref}" in body
    assert "approve" not in body.lower().split("open the call")[1]  # no action in a link
    assert sorted(p["channel"] for p in _posted(world)) == ["UTINA", "UTOM"]
    assert world.notifier.run_once() == (0, 0)  # nothing twice
    assert len(world.mailbox.mails) == 2


def test_a_slack_approval_counts_as_the_mapped_principal_and_names_the_channel(
    world: World,
) -> None:
    chat_id, held = _held(world)
    world.notifier.run_once()
    answer = world.click("UTINA", "approve", _button(chat_id, held))
    assert answer.status_code == 200 and answer.json()["text"] == "Recorded: tina approved pay."
    [row] = world.api("carol").decisions(chat_id=chat_id)["items"]
    assert row["actor"] == "tina" and row["kind"] == "approve"
    assert row["resumed_metadata"] == {"channel": "slack", "slack_user": "UTINA"}
    done = world.api("tom").open_chat(chat_id).decide(held.approve())
    assert done.finish_reason == "stop" and [p for p in PAID if p["chat"] == chat_id]
    world.notifier.run_once()
    updated = [args for method, args in world.slack if method == "chat.update"]
    assert sorted(u["channel"] for u in updated) == ["UTINA", "UTOM"]
    assert all("approved (approve by tom)" in u["text"] for u in updated)


def test_forged_stale_and_replayed_callbacks_record_nothing(world: World) -> None:
    chat_id, held = _held(world)
    value = _button(chat_id, held)
    assert world.click("UTINA", "approve", value, signed=False).status_code == 401
    assert world.click("UTINA", "approve", value, at=time.time() - 600).status_code == 401
    payload = {"type": "block_actions", "user": {"id": "UTINA"}, "trigger_id": "T1",
               "actions": [{"action_id": "approve", "value": value}]}
    body = urlencode({"payload": json.dumps(payload)}).encode()
    assert world.api("carol").decisions(chat_id=chat_id)["items"] == []
    signed_at = time.time()
    assert world.callback(payload, body=body, at=signed_at).status_code == 200
    assert world.callback(payload, body=body, at=signed_at).status_code == 401  # a replay
    [row] = world.api("carol").decisions(chat_id=chat_id)["items"]
    assert row["actor"] == "tina"


def test_someone_outside_the_routing_is_told_why_and_nothing_is_recorded(world: World) -> None:
    chat_id, held = _held(world)
    answer = world.click("UALICE", "approve", _button(chat_id, held))
    assert answer.status_code == 200 and answer.json()["text"].startswith("Nothing was recorded")
    stranger = world.click("UNOBODY", "approve", _button(chat_id, held))
    assert "not linked to a principal" in stranger.json()["text"]
    assert world.api("carol").decisions(chat_id=chat_id)["items"] == []


def test_reject_asks_for_a_reason_in_a_modal_and_records_it(world: World) -> None:
    chat_id, held = _held(world)
    value = _button(chat_id, held)
    assert world.click("UTOM", "reject", value).json() == {}
    [(_, opened)] = [c for c in world.slack if c[0] == "views.open"]
    view = opened["view"] if isinstance(opened["view"], dict) else json.loads(opened["view"])
    empty = {"type": "view_submission", "user": {"id": "UTOM"}, "view": {
        "private_metadata": view["private_metadata"],
        "state": {"values": {"reason": {"reason": {"value": " "}}}}}}
    assert world.callback(empty).json()["response_action"] == "errors"
    submitted = {**empty, "view": {**empty["view"], "state": {"values": {
        "reason": {"reason": {"value": "unknown payee"}}}}}}
    assert world.callback(submitted).json() == {"response_action": "clear"}
    [row] = world.api("carol").decisions(chat_id=chat_id)["items"]
    assert (row["actor"], row["kind"]) == ("tom", "reject")


def test_a_notifier_killed_before_delivery_delivers_after_restart_exactly_once(
    world: World,
) -> None:
    _held(world)
    assert world.notifier.queue_new() == 4  # queued, then the process dies before sending
    restarted = Notifier(world.notifier.service, world.notifier.auth, world.notifier.config)
    assert restarted.run_once() == (0, 4)
    assert restarted.run_once() == (0, 0)
    assert len(world.mailbox.mails) == 2 and len(_posted(world)) == 2


def test_the_channel_stream_is_no_chat(world: World) -> None:
    stream = channels_id("acme")
    with pytest.raises(ChatNotFoundError):
        world.api("root").open_chat(str(stream)).state()
    assert world.client.get(f"/v1/chats/{stream}/events", headers={
        "Authorization": "Bearer key-root"}).status_code == 404


def _fast_forward(world: World) -> None:
    """The time rows wait for (quiet hours' end, a digest's period) has come."""
    store = world.notifier.store.outbox
    store.run(store.sql("UPDATE {t} SET due = 0 WHERE status = 'pending'"), ())


def test_quiet_hours_hold_a_channel_until_they_end(world: World) -> None:
    now = datetime.now(UTC)
    quiet = {"start": (now - timedelta(hours=1)).strftime("%H:%M"),
             "end": (now + timedelta(hours=1)).strftime("%H:%M"), "zone": "UTC"}
    world.api("root").request("PUT", "/v1/channels/email",
                              json={"addresses": EMAILS, "quiet_hours": quiet})
    _held(world)
    assert world.notifier.run_once() == (4, 2)  # Slack now, mail when the quiet ends
    assert world.mailbox.mails == [] and len(_posted(world)) == 2
    _fast_forward(world)
    assert world.notifier.run_once() == (0, 2) and len(world.mailbox.mails) == 2


def test_a_digest_mails_each_approver_once_for_the_calls_of_its_period(world: World) -> None:
    world.api("root").request("PUT", "/v1/channels/email",
                              json={"addresses": EMAILS, "digest_minutes": 60})
    _held(world)
    _held(world)
    assert world.notifier.run_once() == (8, 4)  # the Slack messages; mail waits the hour
    assert world.mailbox.mails == []
    _fast_forward(world)
    assert world.notifier.run_once() == (0, 4)
    assert sorted(to for to, _ in world.mailbox.mails) == [["tina@acme.test"], ["tom@acme.test"]]
    mail = world.mailbox.mails[0][1]
    assert mail["Subject"] == "2 approvals needed"
    assert mail.get_content().count("alice asks to run pay") == 2


def test_given_up_notifications_show_in_readyz_and_metrics(world: World) -> None:
    _held(world)
    world.notifier.config = replace(world.notifier.config, smtp_port=_free_port(),
                                    max_attempts=1)  # nobody listens there
    world.notifier.run_once()
    ready = world.client.get("/readyz").json()
    assert ready["notifications_failed"] == 2 and ready["status"] == "ready"
    scraped = world.client.get("/metrics", headers={"Authorization": "Bearer key-root"}).text
    assert "interlock_notifications_failed 2.0" in scraped


@pytest.mark.parametrize(("start", "end", "at", "until"), [
    ("22:00", "07:00", "23:30", "07:00"), ("22:00", "07:00", "03:00", "07:00"),
    ("22:00", "07:00", "12:00", None), ("09:00", "17:00", "16:59", "17:00"),
    ("09:00", "17:00", "17:00", None),
])
def test_quiet_hours_in_their_zone(start: str, end: str, at: str, until: str | None) -> None:
    quiet = QuietHours.model_validate({"start": start, "end": end, "zone": "Asia/Tokyo"})
    tokyo = ZoneInfo("Asia/Tokyo")
    local = datetime.combine(datetime(2026, 12, 2).date(), clock.fromisoformat(at), tokyo)
    found = quiet.until(local.astimezone(UTC))
    assert (found.astimezone(tokyo).strftime("%H:%M") if found else None) == until
    with pytest.raises(ValueError, match="unknown time zone"):
        QuietHours.model_validate({"start": start, "end": end, "zone": "Mars/Olympus"})


def test_two_admins_racing_on_a_channel_one_wins_and_the_other_writes_nothing() -> None:
    service = build_service("memory://", [])
    try:
        first, second = service.channels.get("acme"), service.channels.get("acme")
        first.set("email", EmailChannel(addresses={"tina": "t@acme.test"}), "root")
        second.set("email", EmailChannel(addresses={"tom": "m@acme.test"}), "admin2")
        service.save_stream(first.id, first.seal(service.sealer.sign))
        with pytest.raises(ConcurrencyError):
            service.save_stream(second.id, second.seal(service.sealer.sign))
        assert service.channels.get("acme").set_by == {"email": "root"}
    finally:
        service.close()
