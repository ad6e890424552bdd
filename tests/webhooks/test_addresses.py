"""D22: webhooks go to public addresses only, checked when subscribed and after resolution."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service, delivery_policy
from interlock.projections import open_read_models
from interlock.settings import load_settings
from interlock.webhooks import DeliveryPolicy
from interlock.webhooks.addresses import AddressPolicy, RefusedAddressError
from tests.api.conftest import KEYS
from tests.observability.receiver import Receiver
from tests.webhooks.kit import LOCAL
from tests.webhooks.test_delivery import SECRET, attempt

ROOT = {"Authorization": "Bearer key-root"}


@pytest.fixture
def http(sqlite_store: str) -> Iterator[TestClient]:
    service = build_service(sqlite_store)
    views = open_read_models(service)
    app = make_app(service, views, AuthConfig.from_mapping(KEYS), delivery=None)
    with TestClient(app) as client:
        yield client
    views.close()
    service.close()


@pytest.mark.parametrize(("host", "says"), [
    ("127.0.0.1", "loopback"), ("localhost", "this machine"), ("169.254.169.254", "link-local"),
    ("10.1.2.3", "private"), ("192.168.0.10", "private"), ("[::1]", "loopback"),
    ("[::ffff:127.0.0.1]", "loopback"), ("0.0.0.0", "unspecified"),
    ("metadata.google.internal", "internal services"), ("2130706433", "loopback"),
    ("0x7f000001", "loopback"), ("127.1", "loopback"), ("224.0.0.1", "multicast"),
    ("[fe80::1]", "link-local"), ("100.64.0.1", "not a public address"),
])
def test_a_private_address_is_refused_when_subscribed(http: TestClient, host: str,
                                                      says: str) -> None:
    refused = http.post("/v1/webhooks", json={"url": f"http://{host}:8080/hook"}, headers=ROOT)
    assert refused.status_code == 422, refused.text
    assert says in refused.text and "INTERLOCK_WEBHOOK_ALLOW_HOSTS" in refused.text
    assert http.get("/v1/webhooks", headers=ROOT).json()["items"] == []


def test_a_public_host_is_accepted(http: TestClient) -> None:
    made = http.post("/v1/webhooks", json={"url": "https://hooks.example.com/in"}, headers=ROOT)
    assert made.status_code == 201, made.text


def test_the_allow_list_opens_an_address(sqlite_store: str) -> None:
    service = build_service(sqlite_store)
    views = open_read_models(service)
    app = make_app(service, views, AuthConfig.from_mapping(KEYS),
                   delivery=DeliveryPolicy(allow=("127.0.0.0/8",)))
    try:
        with TestClient(app) as client:
            made = client.post("/v1/webhooks", json={"url": "http://127.0.0.5:9/h"},
                               headers=ROOT)
            assert made.status_code == 201, made.text
            refused = client.post("/v1/webhooks", json={"url": "http://10.0.0.1/h"},
                                  headers=ROOT)
            assert refused.status_code == 422
    finally:
        views.close()
        service.close()


def test_a_name_that_resolves_to_loopback_is_not_sent_to() -> None:
    """A public-looking name whose DNS answer is 127.0.0.1 (rebinding): refused on sending."""
    receiver = Receiver()
    receiver.up()
    rebound = AddressPolicy(resolve=lambda host, port: ["127.0.0.1"])
    try:
        status, error, _ = attempt(f"http://hooks.example.com:{receiver.port}/hook",
                                   DeliveryPolicy(timeout=2), rebound)
    finally:
        receiver.down()
    assert status == "pending" and error is not None
    assert "RefusedAddressError" in error and "loopback" in error
    assert receiver.received == [] and receiver.rejected == []


def test_the_checked_address_is_the_one_connected_to() -> None:
    """Allowed, the name is sent to the address it resolved to (not resolved again)."""
    receiver = Receiver()
    receiver.secret = SECRET
    receiver.up()
    resolved = AddressPolicy(LOCAL, resolve=lambda host, port: ["127.0.0.1"])
    try:
        status, error, _ = attempt(f"http://hooks.invalid:{receiver.port}/hook",
                                   DeliveryPolicy(timeout=5), resolved)
    finally:
        receiver.down()
    assert (status, error) == ("delivered", None)
    assert [i for i, _ in receiver.received] == ["msg_1_sub"]


def test_the_allow_list_and_the_retention_are_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_WEBHOOK_ALLOW_HOSTS", "127.0.0.1, 10.0.0.0/8 ,hooks.internal")
    monkeypatch.setenv("INTERLOCK_WEBHOOK_RETENTION_DAYS", "2")
    policy = delivery_policy(load_settings(store="memory://"))
    assert policy.allow == ("127.0.0.1", "10.0.0.0/8", "hooks.internal")
    assert policy.retention == 2 * 86400
    allowed = AddressPolicy(policy.allow)
    for host in ("127.0.0.1", "10.9.8.7", "hooks.internal"):
        allowed.check_host(host)
    with pytest.raises(RefusedAddressError):
        allowed.check_host("127.0.0.2")
