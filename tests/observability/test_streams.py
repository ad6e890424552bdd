"""Streams that survive proxies: keep-alive comments, event ids, Last-Event-ID resumption."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.projections import open_read_models
from tests.api.agents import AGENTS, GATES, Gate
from tests.api.conftest import KEYS
from tests.api.server import ThreadServer

STREAM = {"Accept": "text/event-stream"}


@dataclass
class Frame:
    id: str | None
    type: str | None
    data: dict[str, Any] | None
    comment: str | None = None


def frames(lines: Iterator[str]) -> Iterator[Frame]:
    """Parse SSE lines into frames; a comment is a frame of its own."""
    fields: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            yield Frame(None, None, None, comment=line[1:].strip())
        elif line == "":
            if fields:
                data = json.loads(fields["data"]) if "data" in fields else None
                yield Frame(fields.get("id"), fields.get("event"), data)
            fields = {}
        else:
            name, _, value = line.partition(": ")
            fields[name] = value


@pytest.fixture
def url(sqlite_store: str) -> Iterator[str]:
    service = build_service(sqlite_store, AGENTS)
    views = open_read_models(service)
    server = ThreadServer(make_app(service, views, AuthConfig.from_mapping(KEYS),
                                   keepalive=0.05))
    yield server.url
    server.stop()
    views.close()
    service.close()


@pytest.fixture
def alice(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, headers={"Authorization": "Bearer key-alice"},
                      timeout=30) as client:
        yield client


def _gate() -> tuple[str, Gate]:
    token = uuid.uuid4().hex
    GATES[token] = Gate()
    return token, GATES[token]


def _events(got: list[Frame]) -> list[Frame]:
    return [f for f in got if f.comment is None]


def test_a_stream_cut_mid_turn_and_resumed_loses_and_repeats_nothing(
    alice: httpx.Client,
) -> None:
    chat_id = alice.post("/v1/chats", json={"agent": "gateAgent"}).json()["id"]
    token, gate = _gate()
    before: list[Frame] = []
    path, body = f"/v1/chats/{chat_id}/messages", {"text": f"hold-tool {token}"}
    with alice.stream("POST", path, json=body, headers=STREAM) as cut:
        for frame in frames(cut.iter_lines()):
            before.append(frame)
            if frame.comment == "keep-alive":  # the tool is running, and the stream is alive
                break
    assert gate.entered.is_set() and not gate.release.is_set()
    last = _events(before)[-1]
    assert last.type == "tool_request" and last.id is not None

    after: list[Frame] = []
    resume = {**STREAM, "Last-Event-ID": last.id}
    with alice.stream("POST", path, json=body, headers=resume) as again:
        threading.Timer(0.3, gate.release.set).start()  # the turn is still running
        after = list(frames(again.iter_lines()))

    assert any(f.comment == "keep-alive" for f in after)  # comments while the tool held
    events = _events(before) + _events(after)
    assert [e.type for e in events] == [
        "tool_request", "tool_response", "tool_message", "text", "turn_end"]
    stream = (events[0].id or "").split(".")[0]
    assert [e.id for e in events] == [f"{stream}.{i}" for i in range(5)]  # none lost, none twice
    assert events[-1].data == {**(events[-1].data or {}), "finish_reason": "stop"}
    messages = alice.get(f"/v1/chats/{chat_id}").json()["messages"]
    assert [m["role"] for m in messages].count("user") == 1  # the reconnect sent nothing new


def test_a_reconnect_after_the_end_replays_only_what_was_missed(alice: httpx.Client) -> None:
    chat_id = alice.post("/v1/chats", json={"agent": "gateAgent"}).json()["id"]
    path, body = f"/v1/chats/{chat_id}/messages", {"text": "hi"}
    with alice.stream("POST", path, json=body, headers=STREAM) as first:
        full = _events(list(frames(first.iter_lines())))
    assert [e.type for e in full] == ["text", "turn_end"]
    with alice.stream("POST", path, json=body,
                      headers={**STREAM, "Last-Event-ID": full[0].id or ""}) as again:
        rest = _events(list(frames(again.iter_lines())))
    assert [(e.id, e.type, e.data) for e in rest] == [(full[1].id, "turn_end", full[1].data)]


def test_a_stream_this_server_does_not_hold_ends_as_the_log_has_it(alice: httpx.Client) -> None:
    chat_id = alice.post("/v1/chats", json={"agent": "bankingAgent"}).json()["id"]
    path = f"/v1/chats/{chat_id}/messages"
    done = alice.post(path, json={"text": "Transfer $500 to savings."}).json()
    gone = f"{uuid.uuid4().hex}.3"  # another worker's stream, or one forgotten
    with alice.stream("POST", path, json={"text": "x"},
                      headers={**STREAM, "Last-Event-ID": gone}) as again:
        rest = _events(list(frames(again.iter_lines())))
    assert [e.type for e in rest] == ["interrupt", "turn_end"]
    assert rest[0].data and rest[0].data["ref"] == done["interrupts"][0]["ref"]
    assert rest[1].data and rest[1].data["finish_reason"] == "interrupted"
    now = alice.get(f"/v1/chats/{chat_id}").json()["messages"]
    assert len(now) == len(done["messages"])  # the reconnect sent nothing


def test_resumption_is_refused_to_others_and_for_bad_ids(url: str, alice: httpx.Client) -> None:
    chat_id = alice.post("/v1/chats", json={"agent": "gateAgent"}).json()["id"]
    path = f"/v1/chats/{chat_id}/messages"
    with alice.stream("POST", path, json={"text": "hi"}, headers=STREAM) as first:
        ids = [e.id for e in _events(list(frames(first.iter_lines())))]
    eve = {"Authorization": "Bearer key-eve", **STREAM, "Last-Event-ID": ids[0] or ""}
    assert httpx.post(url + path, json={"text": "hi"}, headers=eve).status_code == 404
    bad = alice.post(path, json={"text": "hi"}, headers={**STREAM, "Last-Event-ID": "nope"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
