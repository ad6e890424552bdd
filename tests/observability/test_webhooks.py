"""Webhooks: every notification reaches a receiver that was down for a while, signed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.cli.main import main as cli
from interlock.projections import open_read_models
from interlock.webhooks import DeliveryPolicy
from tests.api.agents import AGENTS
from tests.api.conftest import KEYS
from tests.api.server import ThreadServer
from tests.observability.receiver import Receiver

FAST = DeliveryPolicy(base_delay=0.05, max_delay=0.2, poll=0.05, timeout=2, max_attempts=1000)
Call = Callable[..., httpx.Response]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.down()


def serve(store: str, policy: DeliveryPolicy) -> Iterator[Call]:
    service = build_service(store, AGENTS)
    views = open_read_models(service, poll_interval=0.05)
    server = ThreadServer(make_app(service, views, AuthConfig.from_mapping(KEYS),
                                   delivery=policy))

    def call(who: str, method: str, path: str, **kw: object) -> httpx.Response:
        return httpx.request(method, server.url + path, timeout=30,
                             headers={"Authorization": f"Bearer key-{who}"}, **kw)  # type: ignore[arg-type]

    yield call
    server.stop()
    views.close()
    service.close()


@pytest.fixture
def api(store: str) -> Iterator[Call]:
    yield from serve(store, FAST)


@pytest.fixture
def impatient(sqlite_store: str) -> Iterator[Call]:
    """Gives up after two attempts."""
    yield from serve(sqlite_store, DeliveryPolicy(base_delay=0.01, max_delay=0.01, poll=0.05,
                                                  timeout=2, max_attempts=2))


def until(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _transfer_cycle(api: Call, requester: str, approver: str) -> str:
    chat = api(requester, "POST", "/v1/chats", json={"agent": "bankingAgent"}).json()["id"]
    turn = api(requester, "POST", f"/v1/chats/{chat}/messages",
               json={"text": "Transfer $500 to savings."}).json()
    [ask] = turn["interrupts"]
    decide = {"respond": [{"ref": ask["ref"], "name": ask["name"], "output": {"approved": True}}]}
    assert api(approver, "POST", f"/v1/chats/{chat}/resume", json=decide).json()[
        "finish_reason"] == "stop"
    return str(chat)


def test_a_receiver_down_for_a_while_gets_every_notification(
    api: Call, receiver: Receiver
) -> None:
    made = api("root", "POST", "/v1/webhooks", json={"url": receiver.url})
    assert made.status_code == 201 and made.json()["secret"].startswith("whsec_")
    receiver.secret = made.json()["secret"]
    chat = _transfer_cycle(api, "dana", "bob")
    _transfer_cycle(api, "eve", "eve")  # another tenant: not for this subscription

    until(lambda: any(d["attempts"] >= 3 for d in api(
        "root", "GET", "/v1/webhooks/deliveries").json()["items"]))  # it kept trying
    receiver.up()
    until(lambda: len(receiver.received) >= 4)
    time.sleep(0.3)  # nothing more, nothing twice

    assert receiver.rejected == []
    kinds = [(p["type"], p["data"].get("finish_reason") or p["data"].get("decision"))
             for _, p in receiver.received]
    assert sorted(kinds, key=str) == sorted([
        ("interrupt.pending", None), ("turn.finished", "interrupted"),
        ("interrupt.decided", "respond"), ("turn.finished", "stop")], key=str)
    assert len({i for i, _ in receiver.received}) == 4
    assert {p["data"]["chat_id"] for _, p in receiver.received} == {chat}
    pending = next(p for _, p in receiver.received if p["type"] == "interrupt.pending")
    assert pending["data"] | {"tenant": "acme", "agent": "bankingAgent",
                              "tool": "userApproval"} == pending["data"]
    listed = api("root", "GET", "/v1/webhooks/deliveries").json()["items"]
    assert {d["status"] for d in listed} == {"delivered"} and len(listed) == 4


def test_failed_deliveries_are_listed_and_redelivered(
    impatient: Call, sqlite_store: str, receiver: Receiver,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = impatient
    receiver.secret = api("root", "POST", "/v1/webhooks", json={
        "url": receiver.url, "events": ["turn.finished"]}).json()["secret"]
    chat = api("dana", "POST", "/v1/chats", json={"agent": "gateAgent"}).json()["id"]
    api("dana", "POST", f"/v1/chats/{chat}/messages", json={"text": "hi"})
    failed = "/v1/webhooks/deliveries?status=failed"
    until(lambda: len(api("root", "GET", failed).json()["items"]) == 1)
    [gone] = api("root", "GET", failed).json()["items"]
    assert gone["attempts"] == 2 and "ConnectError" in gone["last_error"]
    assert api("bob", "GET", failed).status_code == 403

    monkeypatch.setenv("INTERLOCK_STORE", sqlite_store)
    assert cli(["webhooks", "failed"]) == 0
    assert gone["id"] in capsys.readouterr().out

    receiver.up()
    assert api("root", "POST", f"/v1/webhooks/deliveries/{gone['id']}/redeliver").status_code \
        == 202
    until(lambda: len(receiver.received) == 1)
    assert receiver.received[0][0] == gone["id"]
    assert api("root", "POST", "/v1/webhooks/deliveries/msg_nope/redeliver").status_code == 404


def test_subscriptions_are_per_tenant_and_admin_only(api: Call) -> None:
    assert api("dana", "POST", "/v1/webhooks", json={"url": "http://x.test/"}).status_code == 403
    bad = api("root", "POST", "/v1/webhooks", json={"url": "ftp://x.test/"})
    assert bad.status_code == 422
    sub = api("root", "POST", "/v1/webhooks", json={"url": "http://x.test/h"}).json()
    listed = api("root", "GET", "/v1/webhooks").json()["items"]
    assert [s["id"] for s in listed] == [sub["id"]] and listed[0]["secret"] is None
    assert api("eve", "GET", "/v1/webhooks").status_code == 403  # eve is no admin
    assert api("root", "DELETE", f"/v1/webhooks/{sub['id']}").status_code == 204
    assert api("root", "DELETE", f"/v1/webhooks/{sub['id']}").status_code == 404
