"""A browser client on another origin (agent-chat-ui's flow: create a thread, stream a run,
resume its interrupt) is let in only from the origins INTERLOCK_CORS_ORIGINS names; none by
default."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from starlette.testclient import TestClient

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_app, build_service
from interlock.projections import open_read_models
from interlock.settings import load_settings
from tests.api.agents import AGENTS
from tests.api.conftest import KEYS
from tests.api.server import ThreadServer

UI = "http://localhost:3000"
PREFLIGHT = {"Origin": UI, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization,content-type"}


def test_the_setting_lets_a_browser_origin_in_and_no_other(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_CORS_ORIGINS", f"{UI}, https://chat.example")
    settings = load_settings(store="memory://")
    assert settings.cors_origin_list() == [UI, "https://chat.example"]
    with TestClient(build_app(settings)) as client:
        allowed = client.options("/agent-protocol/threads", headers=PREFLIGHT)
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == UI
        assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
        other = client.options("/agent-protocol/threads",
                               headers={**PREFLIGHT, "Origin": "https://evil.example"})
        assert other.status_code == 400
        assert "access-control-allow-origin" not in other.headers


def test_no_origin_is_let_in_by_default() -> None:
    with TestClient(build_app(load_settings(store="memory://"))) as client:
        refused = client.options("/agent-protocol/threads", headers=PREFLIGHT)
        assert "access-control-allow-origin" not in refused.headers
        assert refused.status_code == 405


@pytest.fixture
def browser_server(store: str) -> Iterator[str]:
    service = build_service(store, AGENTS)
    views = open_read_models(service)
    server = ThreadServer(make_app(service, views, AuthConfig.from_mapping(KEYS),
                                   cors_origins=[UI]))
    try:
        yield f"{server.url}/agent-protocol"
    finally:
        server.stop()
        views.close()


def test_agent_chat_ui_flow_works_from_its_origin(browser_server: str) -> None:
    headers = {"Origin": UI, "Authorization": "Bearer key-dana"}
    with httpx.Client(base_url=browser_server, headers=headers, timeout=30) as browser:
        assert browser.options("/threads/x/runs/stream", headers=PREFLIGHT).status_code == 200
        made = browser.post("/threads", json={})
        assert made.headers["access-control-allow-origin"] == UI
        tid = made.json()["thread_id"]
        run = {"assistant_id": "bankingAgent", "stream_mode": ["values", "messages-tuple"],
               "input": {"messages": [{"role": "user", "content": "Transfer $500 to savings."}]}}
        with browser.stream("POST", f"/threads/{tid}/runs/stream", json=run) as streamed:
            assert streamed.headers["access-control-allow-origin"] == UI
            assert "Content-Location" in streamed.headers["access-control-expose-headers"]
            body = streamed.read().decode()
        assert "event: messages" in body and '"__interrupt__"' in body
        resumed = browser.post(f"/threads/{tid}/runs/wait", json={
            "assistant_id": "bankingAgent", "command": {"resume": {"approved": True}}})
        assert resumed.status_code == 200 and "__interrupt__" not in resumed.json()
        assert resumed.headers["access-control-allow-origin"] == UI
