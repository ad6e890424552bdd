"""Webhooks: every notification reaches a receiver that was down for a while, signed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import httpx
import pytest

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.cli.main import main as cli
from interlock.domain import Interlock
from interlock.projections import open_read_models
from interlock.projections.readmodels import SqlReadModels
from interlock.sweeper import Sweeper
from interlock.webhooks import DeliveryPolicy
from tests.api.conftest import KEYS
from tests.api.server import ThreadServer
from tests.observability.agents import AGENTS
from tests.observability.receiver import Receiver

LOCAL = ("127.0.0.1",)  # the receivers listen on loopback, refused unless allowed
FAST = DeliveryPolicy(base_delay=0.05, max_delay=0.2, poll=0.05, timeout=2, max_attempts=1000,
                      allow=LOCAL)
Call = Callable[..., httpx.Response]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.down()


@contextmanager
def running(store: str, policy: DeliveryPolicy) -> Iterator[tuple[Call, Interlock, Any]]:
    """A server delivering webhooks, how to call it, and its service and read models."""
    service = build_service(store, AGENTS)
    views = open_read_models(service, poll_interval=0.05)
    server = ThreadServer(make_app(service, views, AuthConfig.from_mapping(KEYS),
                                   delivery=policy))

    def call(who: str, method: str, path: str, **kw: object) -> httpx.Response:
        return httpx.request(method, server.url + path, timeout=30,
                             headers={"Authorization": f"Bearer key-{who}"}, **kw)  # type: ignore[arg-type]

    try:
        yield call, service, views
    finally:
        server.stop()
        views.close()
        service.close()


def serve(store: str, policy: DeliveryPolicy) -> Iterator[Call]:
    with running(store, policy) as (call, _, _):
        yield call


@pytest.fixture
def api(store: str) -> Iterator[Call]:
    yield from serve(store, FAST)


@pytest.fixture
def impatient(sqlite_store: str) -> Iterator[Call]:
    """Gives up after two attempts."""
    yield from serve(sqlite_store, DeliveryPolicy(base_delay=0.01, max_delay=0.01, poll=0.05,
                                                  timeout=2, max_attempts=2, allow=LOCAL))


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
    until(lambda: [d["status"] for d in api("root", "GET", "/v1/webhooks/deliveries").json()[
        "items"]] == ["delivered"] * 4)  # each marked delivered once its receiver said 2xx

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
    assert gone["attempts"] == 2 and "ConnectionRefusedError" in gone["last_error"]
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


@pytest.fixture
def swept(store: str) -> Iterator[tuple[Call, Callable[[], int]]]:
    """The API, and one sweep of due approvals (what the server's sweeper does each second)."""
    with running(store, FAST) as (call, service, views):
        assert isinstance(views, SqlReadModels)
        yield call, Sweeper(service, views).sweep


def _held(api: Call, agent: str) -> tuple[str, dict[str, Any]]:
    chat = api("alice", "POST", "/v1/chats", json={"agent": agent}).json()["id"]
    turn = api("alice", "POST", f"/v1/chats/{chat}/messages", json={"text": "pay 500 bob-corp"})
    [held] = turn.json()["interrupts"]
    return str(chat), held


def _vote(api: Call, who: str, chat: str, held: dict[str, Any], kind: str,
          **extra: object) -> str:
    entry = {"ref": held["ref"], "name": held["name"], **extra}
    turn = api(who, "POST", f"/v1/chats/{chat}/resume", json={kind: [entry]})
    assert turn.status_code == 200, turn.text
    return str(turn.json()["finish_reason"])


@pytest.mark.parametrize(("url", "says"), [
    ("http://a" + "b" * 70 + ".example/hook", "not a valid DNS name"),
    ("http://" + "\u00e9" * 100 + ".example/", "not a valid DNS name"),
    ("http://a..b/", "not a valid DNS name"),
    ("http://127.0.0.1:0/", "port 0"),
    ("http://user:secret@hooks.example/", "credentials"),
    ("http://hooks.example/" + "p" * 3000, "longer than 2000"),
])
def test_a_url_no_delivery_can_reach_is_refused(api: Call, url: str, says: str) -> None:
    bad = api("root", "POST", "/v1/webhooks", json={"url": url})
    assert bad.status_code == 422 and says in bad.text
    assert api("root", "GET", "/v1/webhooks").json()["items"] == []


def test_approval_decisions_and_expiries_are_notified(
    swept: tuple[Call, Callable[[], int]], receiver: Receiver
) -> None:
    api, sweep = swept
    receiver.secret = api("root", "POST", "/v1/webhooks", json={"url": receiver.url, "events": [
        "interrupt.pending", "interrupt.decided", "interrupt.expired"]}).json()["secret"]
    receiver.up()
    voted, held = _held(api, "payAgent")
    assert _vote(api, "tina", voted, held, "approve") == "interrupted"  # one of two
    assert _vote(api, "tom", voted, held, "reject", reason="unknown payee") == "stop"
    edited, again = _held(api, "payAgent")
    assert _vote(api, "tina", edited, again, "edit",
                 input={"amount": 400, "to": "bob-corp"}, reason="400 was agreed") == "interrupted"
    withdrawn = api("root", "POST", f"/v1/chats/{edited}/withdraw",
                    json={"refs": [again["ref"]], "reason": "wrong payee"})
    assert withdrawn.status_code == 200, withdrawn.text
    expired, late = _held(api, "hastyPayAgent")
    until(lambda: sweep() == 1)  # once the inbox has the held call, it is due

    until(lambda: len(receiver.received) >= 8 and all(
        d["status"] == "delivered"
        for d in api("root", "GET", "/v1/webhooks/deliveries").json()["items"]))
    assert receiver.rejected == [] and len(receiver.received) == 8
    got = {(p["data"]["chat_id"], p["type"], p["data"].get("decision")): p["data"]
           for _, p in receiver.received}
    assert sorted(got) == sorted([
        (voted, "interrupt.pending", None), (voted, "interrupt.decided", "approve"),
        (voted, "interrupt.decided", "reject"), (edited, "interrupt.pending", None),
        (edited, "interrupt.decided", "edit"), (edited, "interrupt.decided", "withdraw"),
        (expired, "interrupt.pending", None), (expired, "interrupt.expired", "expire")])
    asked = got[(voted, "interrupt.pending", None)]
    assert (asked["tool"], asked["ref"]) == ("pay", held["ref"])
    assert asked["metadata"]["approval"]["quorum"] == 2
    assert got[(voted, "interrupt.decided", "approve")] | {
        "actor": "tina", "outcome": "pending", "tool": "pay"} == \
        got[(voted, "interrupt.decided", "approve")]
    assert got[(voted, "interrupt.decided", "reject")] | {
        "actor": "tom", "outcome": "rejected", "reason": "unknown payee"} == \
        got[(voted, "interrupt.decided", "reject")]
    assert got[(edited, "interrupt.decided", "edit")]["actor"] == "tina"
    assert got[(edited, "interrupt.decided", "withdraw")] | {
        "actor": "root", "reason": "wrong payee"} == got[(edited, "interrupt.decided", "withdraw")]
    gone = got[(expired, "interrupt.expired", "expire")]
    assert (gone["ref"], gone["tool"], gone["agent"]) == (late["ref"], "pay", "hastyPayAgent")
    terms = got[(expired, "interrupt.pending", None)]["metadata"]["approval"]
    assert datetime.fromisoformat(gone["expires_at"]) == datetime.fromisoformat(
        terms["expires_at"])


class _FlakyView:
    """Claims fail once with an error nobody planned for, then find nothing due."""

    def __init__(self) -> None:
        self.claims = 0

    def claim(self, limit: int, lease: object, *fair: object) -> list[object]:
        self.claims += 1
        if self.claims == 1:
            raise AssertionError("a bug in a delivery round")
        return []


def test_a_delivery_round_that_fails_unexpectedly_does_not_stop_the_deliverer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from interlock.webhooks import Deliverer

    view = _FlakyView()
    deliverer = Deliverer(view, FAST)  # type: ignore[arg-type]
    deliverer.start()
    try:
        until(lambda: view.claims >= 3, timeout=5)  # it went on after the failure
    finally:
        deliverer.stop()
    assert "failed unexpectedly" in caplog.text


class _OneDue:
    """One claimed delivery to `url`, and how its attempts were settled."""

    def __init__(self, url: str) -> None:
        from interlock.projections.views.webhooks import Due

        self.due = [Due("msg_1_sub", 1, '{"type":"turn.finished"}', url, "whsec_" + "A" * 32)]
        self.settled: list[tuple[str, str, str | None]] = []

    def claim(self, limit: int, lease: object, *fair: object) -> list[object]:
        due, self.due = self.due, []
        return due  # type: ignore[return-value]

    def settle(self, delivery_id: str, status: str, next_at: object, error: str | None) -> None:
        self.settled.append((delivery_id, status, error))


def test_a_url_the_socket_layer_cannot_encode_is_settled_as_a_failed_attempt() -> None:
    from interlock.webhooks import Deliverer

    view = _OneDue("http://a" + "b" * 70 + ".example/hook")  # a 71-character host label
    deliverer = Deliverer(view, FAST)  # type: ignore[arg-type]
    try:
        assert deliverer.run_once() == 1
        assert deliverer.idle(timeout=5)
    finally:
        deliverer.stop()
    [(delivery, status, error)] = view.settled
    assert (delivery, status) == ("msg_1_sub", "pending") and error and "UnicodeError" in error
