"""Plain dev mode (the README's `interlock serve`): its one user, `dev`, asks for every call,
so four-eyes refuses it every policy-held one; the banner and the refusal name the way on."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.api.dev_principals import dev_auth
from interlock.bootstrap import build_service
from interlock.projections import open_read_models
from tests.api.agents import AGENTS
from tests.api.server import ThreadServer

FLAG = "--dev-principals alice,tina:treasury,tom:treasury"


@pytest.fixture
def serving(sqlite_store: str) -> Iterator[object]:
    service = build_service(sqlite_store, AGENTS)
    views = open_read_models(service)
    servers: list[ThreadServer] = []

    def serve(auth: AuthConfig) -> str:
        servers.append(ThreadServer(make_app(service, views, auth)))
        return servers[-1].url

    yield serve
    for server in servers:
        server.stop()
    views.close()


def test_a_vote_by_dev_on_its_own_call_points_to_dev_principals(serving: object) -> None:
    url = serving(AuthConfig(None))  # type: ignore[operator]
    chat = httpx.post(f"{url}/v1/chats", json={"agent": "payAgent"}).json()["id"]
    [held] = httpx.post(f"{url}/v1/chats/{chat}/messages", json={"text": "pay 500 bob"},
                        timeout=30).json()["interrupts"]
    vote = {"approve": [{"ref": held["ref"], "name": held["name"]}]}
    refused = httpx.post(f"{url}/v1/chats/{chat}/resume", json=vote, timeout=30)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["details"]["reason"] == "requester" and FLAG in error["details"]["hint"]
    assert error["message"].startswith("dev ") and FLAG in error["message"]


def test_named_dev_principals_are_refused_without_the_hint(serving: object) -> None:
    url = serving(dev_auth("alice:requester:treasury"))  # type: ignore[operator]
    alice = {"Authorization": "Bearer alice"}
    chat = httpx.post(f"{url}/v1/chats", json={"agent": "payAgent"}, headers=alice).json()["id"]
    [held] = httpx.post(f"{url}/v1/chats/{chat}/messages", json={"text": "pay 500 bob"},
                        headers=alice, timeout=30).json()["interrupts"]
    vote = {"approve": [{"ref": held["ref"], "name": held["name"]}]}
    refused = httpx.post(f"{url}/v1/chats/{chat}/resume", json=vote, headers=alice, timeout=30)
    assert refused.status_code == 403 and "hint" not in refused.json()["error"]["details"]


def test_the_dev_banner_names_the_flag_only_when_dev_is_alone(
    serving: object, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="interlock.api"):
        httpx.get(serving(AuthConfig(None)) + "/healthz")  # type: ignore[operator]
    alone = [r.getMessage() for r in caplog.records if r.name == "interlock.api"]
    assert any("DEV MODE" in line for line in alone)
    assert any(FLAG in line for line in alone)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="interlock.api"):
        httpx.get(serving(dev_auth("alice,tina:treasury")) + "/healthz")  # type: ignore[operator]
    named = [r.getMessage() for r in caplog.records if r.name == "interlock.api"]
    assert any("DEV MODE" in line for line in named)
    assert not any("--dev-principals" in line for line in named)
