"""The chat cycle's hot routes (`interlock.api.hot`): served outside FastAPI's routing when
plain, each answer byte for byte what FastAPI's route gives, anything unusual left to it."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute, serialize_response
from fastapi.testclient import TestClient
from pydantic import BaseModel
from starlette.types import Receive, Scope, Send

from interlock.api import hot
from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.api.routers import chats
from interlock.bootstrap import build_service
from interlock.projections import open_read_models
from tests.api.agents import AGENTS
from tests.api.conftest import KEYS
from tests.conftest import Lines

DANA = {"Authorization": "Bearer key-dana"}
TRANSFER = "Transfer $500 to savings."


class Passed:
    """Records the requests the hot routes passed on to FastAPI."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.routes: list[str] = []  # the names of the routes FastAPI picked for them


@pytest.fixture
def app_and_passed(store: str) -> Iterator[tuple[TestClient, Passed]]:
    service = build_service(store, AGENTS)
    views = open_read_models(service)
    app = make_app(service, views, AuthConfig.from_mapping(KEYS))
    passed = Passed()
    try:
        with TestClient(app) as client:
            client.get("/healthz")  # builds the middleware stack
            layer: Any = app.middleware_stack
            while not isinstance(layer, hot.HotRoutes):
                layer = layer.app
            inner = layer.app

            async def recording(scope: Scope, receive: Receive, send: Send) -> None:
                if scope["type"] == "http":
                    passed.paths.append(f"{scope['method']} {scope['path']}")
                await inner(scope, receive, send)
                if scope["type"] == "http" and "route" in scope:
                    passed.routes.append(scope["route"].name)

            layer.app = recording
            yield client, passed
    finally:
        views.close()
        service.close()


@pytest.fixture
def http(app_and_passed: tuple[TestClient, Passed]) -> TestClient:
    return app_and_passed[0]


@pytest.fixture
def passed(app_and_passed: tuple[TestClient, Passed]) -> Passed:
    return app_and_passed[1]


def _route(name: str) -> APIRoute:
    [route] = [r for r in chats.router.routes if isinstance(r, APIRoute) and r.name == name]
    return route


def _fastapi_bytes(name: str, model: BaseModel) -> bytes:
    """What FastAPI's own route would answer for `model`: its response field's JSON."""
    content = asyncio.run(serialize_response(
        field=_route(name).response_field, response_content=model, dump_json=True))
    assert isinstance(content, bytes)
    return content


def test_the_cycle_answers_fastapis_bytes_without_fastapi(
    http: TestClient, passed: Passed, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[BaseModel] = []
    start_chat, run_turn = chats.start_chat, hot.run_turn

    async def starting(*args: Any) -> Any:
        made.append(await start_chat(*args))
        return made[-1]

    async def running(*args: Any) -> Any:
        made.append(await run_turn(*args))
        return made[-1]

    monkeypatch.setattr(chats, "start_chat", starting)
    monkeypatch.setattr(hot, "run_turn", running)

    created = http.post("/v1/chats", json={"agent": "bankingAgent", "metadata": {"k": None}},
                        headers=DANA)
    chat = created.json()["id"]
    sent = http.post(f"/v1/chats/{chat}/messages", json={"text": TRANSFER}, headers=DANA)
    [interrupt] = sent.json()["interrupts"]
    done = http.post(f"/v1/chats/{chat}/resume", headers={**DANA, "Idempotency-Key": "k-1"},
                     json={"respond": [{"ref": interrupt["ref"], "name": interrupt["name"],
                                        "output": {"approved": True}}]})

    assert passed.paths == []  # none of the three reached FastAPI's router
    assert [created.status_code, sent.status_code, done.status_code] == [201, 200, 200]
    for answer, name, model in zip((created, sent, done),
                                   ("create_chat", "send_message", "resume"), made,
                                   strict=True):
        assert answer.content == _fastapi_bytes(name, model)
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["content-length"] == str(len(answer.content))
        assert answer.headers["x-request-id"]
    assert done.json()["finish_reason"] == "stop"
    # the idempotency key reached the service: the same resume replays its answer
    again = http.post(f"/v1/chats/{chat}/resume", headers={**DANA, "Idempotency-Key": "k-1"},
                      json={"respond": [{"ref": interrupt["ref"], "name": interrupt["name"],
                                         "output": {"approved": True}}]})
    assert again.status_code == 200 and again.json()["version"] == done.json()["version"]


def test_a_chat_opened_with_its_message_answers_fastapis_bytes_without_fastapi(
    http: TestClient, passed: Passed, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[BaseModel] = []
    start_chat = chats.start_chat

    async def starting(*args: Any) -> Any:
        made.append(await start_chat(*args))
        return made[-1]

    monkeypatch.setattr(chats, "start_chat", starting)
    opened = http.post("/v1/chats", json={"agent": "bankingAgent", "text": TRANSFER},
                       headers=DANA)
    assert passed.paths == []
    assert opened.status_code == 201
    assert opened.content == _fastapi_bytes("create_chat", made[0])
    assert opened.json()["finish_reason"] == "interrupted"
    # asked for a stream, it goes to FastAPI's route, which answers the first turn as JSON
    streamed = http.post("/v1/chats", json={"agent": "bankingAgent", "text": TRANSFER},
                         headers={**DANA, "Accept": "text/event-stream"})
    assert passed.paths == ["POST /v1/chats"]
    assert streamed.status_code == 201 and streamed.json()["finish_reason"] == "interrupted"


@pytest.mark.parametrize("request_", [
    ("/v1/chats", {"content": b'{"agent": "bankingAgent"', "headers":
                   {"Content-Type": "application/json"}}),  # bad JSON
    ("/v1/chats", {"json": {"agent": ""}}),  # fails the model
    ("/v1/chats", {"json": {"agent": "bankingAgent", "extra": 1}}),
    ("/v1/chats", {"json": {"agent": "bankingAgent", "text": ""}}),
    ("/v1/chats", {"json": {"agent": "bankingAgent", "max_turns": 1}}),  # no text to budget
    ("/v1/chats", {"content": b'{"agent": "bankingAgent"}',
                   "headers": {"Content-Type": "text/plain"}}),  # not sent as JSON
    ("/v1/chats", {"content": b"", "headers": {"Content-Type": "application/json"}}),
    ("/v1/chats/not-a-uuid/messages", {"json": {"text": "hi"}}),
    ("/v1/chats/{chat}/messages", {"json": {"text": ""}}),
    ("/v1/chats/{chat}/resume", {"json": {}, "headers": {"Idempotency-Key": ""}}),
    ("/v1/chats/{chat}/resume", {"json": {}, "headers": {"Idempotency-Key": "k" * 201}}),
])
def test_what_fastapi_would_refuse_goes_to_fastapi(
    http: TestClient, passed: Passed, request_: tuple[str, dict[str, Any]]
) -> None:
    chat = http.post("/v1/chats", json={"agent": "bankingAgent"}, headers=DANA).json()["id"]
    path, kwargs = request_
    path = path.format(chat=chat)
    answer = http.post(path, **{**kwargs, "headers": {**DANA, **kwargs.get("headers", {})}})

    assert passed.paths == [f"POST {path}"]
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and error["message"]


def test_a_stream_and_an_upper_case_id_go_to_fastapi(http: TestClient, passed: Passed) -> None:
    chat = http.post("/v1/chats", json={"agent": "bankingAgent"}, headers=DANA).json()["id"]
    upper = http.post(f"/v1/chats/{chat.upper()}/messages", json={"text": TRANSFER},
                      headers=DANA)
    assert upper.status_code == 200 and upper.json()["finish_reason"] == "interrupted"
    other = http.post("/v1/chats", json={"agent": "bankingAgent"}, headers=DANA).json()["id"]
    streamed = http.post(f"/v1/chats/{other}/messages", json={"text": TRANSFER},
                         headers={**DANA, "Accept": "text/event-stream"})
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert "event: interrupt" in streamed.text
    assert passed.paths == [f"POST /v1/chats/{chat.upper()}/messages",
                            f"POST /v1/chats/{other}/messages"]


def test_refusals_on_the_hot_path_name_the_problem(http: TestClient, passed: Passed) -> None:
    missing = uuid.uuid4()
    unknown = http.post(f"/v1/chats/{missing}/messages", json={"text": TRANSFER}, headers=DANA)
    agent = http.post("/v1/chats", json={"agent": "nobody"}, headers=DANA)
    nobody = http.post("/v1/chats", json={"agent": "bankingAgent"})
    stranger = http.post("/v1/chats", json={"agent": "bankingAgent"},
                         headers={"Authorization": "Bearer nope"})
    bob = http.post("/v1/chats", json={"agent": "bankingAgent"},
                    headers={"Authorization": "Bearer key-bob"})  # an approver only

    assert passed.paths == []
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "chat_not_found")
    assert str(missing) in unknown.json()["error"]["message"]
    assert (agent.status_code, agent.json()["error"]["code"]) == (422, "unknown_agent")
    assert (nobody.status_code, nobody.headers["www-authenticate"]) == (401, "Bearer")
    assert nobody.json()["error"]["code"] == "unauthenticated"
    assert stranger.json()["error"]["message"] == "unknown API key"
    assert (bob.status_code, bob.json()["error"]["code"]) == (403, "forbidden")
    assert "requester" in bob.json()["error"]["message"]


def test_hot_answers_are_logged_and_counted_under_their_route(
    http: TestClient, json_logs: Lines
) -> None:
    chat = http.post("/v1/chats", json={"agent": "bankingAgent"},
                     headers={**DANA, "X-Request-ID": "req-1"}).json()["id"]
    http.post(f"/v1/chats/{chat}/messages", json={"text": TRANSFER}, headers=DANA)
    access = json_logs.of("interlock.access")
    assert [(x["route"], x["status"], x["principal"]) for x in access] == [
        ("/v1/chats", 201, "dana"), ("/v1/chats/{chat_id}/messages", 200, "dana")]
    assert access[0]["request_id"] == "req-1" and access[1]["chat_id"] == chat
    metrics = http.get("/metrics").text
    assert 'route="/v1/chats/{chat_id}/messages",status="200"' in metrics


def test_the_hot_paths_are_the_routes_fastapi_would_pick(
    http: TestClient, passed: Passed
) -> None:
    """FastAPI's own matching sends these requests to the routes the hot paths stand for
    (no route registered before them takes them): a `+json` content type makes the hot
    routes pass them on, and FastAPI serves them."""
    vendor = {**DANA, "Content-Type": "application/vnd.interlock+json"}
    chat = http.post("/v1/chats", content=b'{"agent": "bankingAgent"}', headers=vendor)
    sent = http.post(f"/v1/chats/{chat.json()['id']}/messages",
                     content=json.dumps({"text": TRANSFER}).encode(), headers=vendor)
    [interrupt] = sent.json()["interrupts"]
    body = {"respond": [{"ref": interrupt["ref"], "name": interrupt["name"],
                         "output": {"approved": True}}]}
    done = http.post(f"/v1/chats/{chat.json()['id']}/resume",
                     content=json.dumps(body).encode(), headers=vendor)
    assert [chat.status_code, sent.status_code, done.status_code] == [201, 200, 200]
    assert passed.routes == ["create_chat", "send_message", "resume"]
