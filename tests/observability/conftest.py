"""An in-process app with API keys, a TestClient on it, and captured JSON log lines."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.domain import Interlock
from interlock.projections import open_read_models
from interlock.projections.interface import ReadModels
from tests.api.conftest import KEYS
from tests.observability.agents import AGENTS


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer key-{name}"}


@pytest.fixture
def service(store: str) -> Iterator[Interlock]:
    service = build_service(store, AGENTS)
    yield service
    service.close()


@pytest.fixture
def views(service: Interlock) -> Iterator[ReadModels]:
    views = open_read_models(service)
    yield views
    views.close()


@pytest.fixture
def http(service: Interlock, views: ReadModels) -> Iterator[TestClient]:
    app = make_app(service, views, AuthConfig.from_mapping(KEYS))
    with TestClient(app) as client:
        yield client


def hold_payment(http: TestClient, agent: str) -> tuple[str, dict[str, Any]]:
    """Alice asks `agent` to pay: the chat's id and the call held for approval."""
    chat = http.post("/v1/chats", json={"agent": agent}, headers=auth("alice")).json()["id"]
    turn = http.post(f"/v1/chats/{chat}/messages", json={"text": "pay 500 bob-corp"},
                     headers=auth("alice")).json()
    [call] = turn["interrupts"]
    return str(chat), call
