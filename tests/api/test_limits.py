"""Bounds on what a request may make the service keep and copy: each a 4xx naming its setting."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID, uuid4

import httpx
import pytest

from interlock.domain.limits import Limits, TooManyForksError
from tests.api.conftest import Live


@pytest.fixture
def raw(live: Live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, headers={"Authorization": "Bearer key-dana"},
                      timeout=30) as c:
        yield c


def _chat(raw: httpx.Client) -> tuple[str, int]:
    chat: str = raw.post("/v1/chats", json={"agent": "bankingAgent"}).json()["id"]
    turn = raw.post(f"/v1/chats/{chat}/messages", json={"text": "hello"})
    return chat, turn.json()["version"]


def test_forks_of_one_chat_are_limited_per_minute_on_every_door(
    live: Live, raw: httpx.Client
) -> None:
    live.service.limits = Limits(forks_per_minute=3)
    (chat, at), (other, other_at) = _chat(raw), _chat(raw)
    for _ in range(3):
        assert raw.post(f"/v1/chats/{chat}/fork", json={"version": at}).status_code == 201
    refused = raw.post(f"/v1/chats/{chat}/fork", json={"version": at})
    error = refused.json()["error"]
    assert (refused.status_code, error["code"]) == (429, "too_many_forks")
    assert error["details"]["limit"] == "INTERLOCK_FORKS_PER_MINUTE"
    assert "INTERLOCK_FORKS_PER_MINUTE=3" in error["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    with pytest.raises(TooManyForksError):  # the console's door: the same service.fork
        live.service.fork(UUID(chat), at, actor="dana", tenant="acme")
    assert raw.post(f"/v1/chats/{other}/fork", json={"version": other_at}).status_code == 201


def test_the_fork_window_slides() -> None:
    at = [0.0]
    limits = Limits(forks_per_minute=2, clock=lambda: at[0])
    chat = uuid4()
    limits.fork(chat)
    at[0] = 30.0
    limits.fork(chat)
    with pytest.raises(TooManyForksError) as refused:
        limits.fork(chat)
    assert refused.value.retry_after == 30
    at[0] = 60.5
    limits.fork(chat)  # the first fork left the window


@pytest.mark.parametrize(("metadata", "setting"), [
    ({f"k{i}": i for i in range(60_000)}, "INTERLOCK_MAX_METADATA_KEYS"),
    ({"nested": [{f"k{i}": i} for i in range(1_500)]}, "INTERLOCK_MAX_METADATA_KEYS"),
    ({"blob": "x" * 900_000}, "INTERLOCK_MAX_METADATA_BYTES"),
])
def test_metadata_is_bounded_for_chats_and_threads(
    raw: httpx.Client, metadata: dict[str, object], setting: str
) -> None:
    chats = raw.post("/v1/chats", json={"agent": "bankingAgent", "metadata": metadata})
    threads = raw.post("/agent-protocol/threads",
                       json={"metadata": {"graph_id": "bankingAgent", **metadata}})
    for answer in (chats, threads):
        error = answer.json()["error"]
        assert (answer.status_code, error["code"]) == (413, "metadata_too_large"), answer.text
        assert error["details"]["limit"] == setting and setting in error["message"]
    fine = raw.post("/v1/chats", json={"agent": "bankingAgent", "metadata": {"k": "v" * 1000}})
    assert fine.status_code == 201
