"""Every error code of the contract, each from a request a real client could send."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from interlock.client import (
    Chat,
    ChatNotFoundError,
    Client,
    ConcurrentModificationError,
    DuplicateRefError,
    EmptyResumeError,
    ForbiddenError,
    IdempotencyKeyReusedError,
    InterlockAPIError,
    InterruptNameMismatchError,
    InterruptNotPendingError,
    InvalidToolInputError,
    InvalidToolOutputError,
    ModelError,
    NothingToRetryError,
    PendingInterruptsError,
    Respond,
    Restart,
    StaleInterruptError,
    TurnInProgressError,
    UnauthenticatedError,
    UnknownAgentError,
    UnknownInterruptError,
)
from tests.api.agents import FLAKY_DOWN, GATES, Gate
from tests.api.conftest import ClientFor, Live


@pytest.fixture
def dana(client_for: ClientFor) -> Client:
    return client_for("dana")


@pytest.fixture
def raw(live: Live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, headers={"Authorization": "Bearer key-dana"}) as c:
        yield c


@pytest.fixture
def waiting(dana: Client) -> tuple[Chat, Respond]:
    """A banking chat waiting for its userApproval decision."""
    chat = dana.chat("bankingAgent")
    [approval] = chat.send("Transfer $500 to savings.").interrupts
    return chat, approval.respond({"approved": True})


def _raises(
    exc: type[InterlockAPIError], status: int, call: Callable[[], Any]
) -> InterlockAPIError:
    with pytest.raises(exc) as info:
        call()
    assert info.value.status == status
    assert info.value.code == exc.code
    return info.value


def test_chat_not_found(dana: Client) -> None:
    err = _raises(ChatNotFoundError, 404, lambda: dana.open_chat(str(uuid.uuid4())))
    assert "chat_id" in err.details


def test_unknown_agent(dana: Client) -> None:
    err = _raises(UnknownAgentError, 422, lambda: dana.chat("noSuchAgent"))
    assert err.details == {"agent": "noSuchAgent"}


def test_resume_refusals(waiting: tuple[Chat, Respond]) -> None:
    chat, ok = waiting
    _raises(UnknownInterruptError, 422, lambda: chat.resume(respond=[Respond("nope", ok.name)]))
    _raises(
        InterruptNameMismatchError,
        422,
        lambda: chat.resume(respond=[Respond(ok.ref, "transferMoney", {"approved": True})]),
    )
    _raises(DuplicateRefError, 422, lambda: chat.resume(respond=[ok, ok]))
    _raises(EmptyResumeError, 422, lambda: chat.resume())
    err = _raises(
        InvalidToolOutputError,
        422,
        lambda: chat.resume(respond=[Respond(ok.ref, ok.name, {"approved": "maybe"})]),
    )
    assert err.details["ref"] == ok.ref
    assert chat.state()["status"] == "interrupted"  # nothing was recorded


def test_invalid_tool_input(dana: Client) -> None:
    chat = dana.chat("bankingAgent")
    [approval] = chat.send("Transfer $1500 to savings.").interrupts
    [limit] = chat.resume(respond=[approval.respond({"approved": True})]).interrupts
    bad = limit.restart(replace_input={"amount": -5, "to_account": "savings"})
    err = _raises(InvalidToolInputError, 422, lambda: chat.resume(restart=[bad]))
    assert err.details["tool"] == "transferMoney"


def test_interrupt_not_pending_says_who_decided(waiting: tuple[Chat, Respond]) -> None:
    chat, ok = waiting
    chat.resume(respond=[ok])
    err = _raises(InterruptNotPendingError, 409, lambda: chat.resume(respond=[ok]))
    assert err.details["ref"] == ok.ref
    assert (err.details["decided_by"], err.details["decision"]) == ("dana", "respond")
    assert err.details["decided_at"]


def test_pending_interrupts(waiting: tuple[Chat, Respond]) -> None:
    chat, ok = waiting
    err = _raises(PendingInterruptsError, 409, lambda: chat.send("hello"))
    assert err.details["refs"] == [ok.ref]


def test_idempotency_key_replays_and_refuses_another_body(waiting: tuple[Chat, Respond]) -> None:
    chat, ok = waiting
    first = chat.resume(respond=[ok], idempotency_key="k-1")
    assert chat.resume(respond=[ok], idempotency_key="k-1") == first
    other = Respond(ok.ref, ok.name, {"approved": False})
    _raises(
        IdempotencyKeyReusedError, 422, lambda: chat.resume(respond=[other], idempotency_key="k-1")
    )


@pytest.fixture
def gate() -> Iterator[tuple[str, Gate]]:
    token = uuid.uuid4().hex
    GATES[token] = Gate()
    yield token, GATES[token]
    GATES[token].release.set()
    del GATES[token]


def _in_background(call: Callable[[], Any]) -> Iterator[Future[Any]]:
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(call)


def test_turn_in_progress(dana: Client, gate: tuple[str, Gate]) -> None:
    token, g = gate
    chat = dana.chat("gateAgent")
    for running in _in_background(lambda: chat.send(f"hold-tool {token}")):
        assert g.entered.wait(10)  # the tool's request is committed: the chat is running
        _raises(TurnInProgressError, 409, lambda: chat.send("hello"))
        g.release.set()
        assert running.result(10).text == "gate done"


def test_concurrent_modification(dana: Client, gate: tuple[str, Gate]) -> None:
    token, g = gate
    chat = dana.chat("gateAgent")
    for slow in _in_background(lambda: chat.send(f"hold-model {token}")):
        assert g.entered.wait(10)  # loaded the chat at its version; nothing committed yet
        assert chat.send("hello").text == "ok"
        g.release.set()
        with pytest.raises(ConcurrentModificationError) as info:
            slow.result(10)
    assert info.value.status == 409
    assert [m["content"][0]["text"] for m in chat.state()["messages"]] == ["hello", "ok"]


def test_model_error_then_retry(dana: Client) -> None:
    chat = dana.chat("flakyAgent")
    FLAKY_DOWN.set()
    try:
        err = _raises(ModelError, 502, lambda: chat.send("are you there?"))
    finally:
        FLAKY_DOWN.clear()
    assert err.details["chat_id"] == chat.id
    assert chat.state()["status"] == "failed"
    assert chat.retry().text == "back online"
    _raises(NothingToRetryError, 409, chat.retry)


def test_unauthenticated(live: Live) -> None:
    for key in (None, "wrong-key"):
        with Client(live.url, api_key=key) as anonymous:
            _raises(UnauthenticatedError, 401, lambda c=anonymous: c.chat("bankingAgent"))


def test_forbidden(client_for: ClientFor) -> None:
    _raises(ForbiddenError, 403, lambda: client_for("carol").chat("bankingAgent"))


JSON = "application/json"


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("POST", "/v1/chats", {"content": b"{not json", "headers": {"content-type": JSON}}),
        ("POST", "/v1/chats", {"content": b"agent=x", "headers": {"content-type": "text/plain"}}),
        ("POST", "/v1/chats", {"json": {"agent": "bankingAgent", "colour": "blue"}}),
        ("POST", "/v1/chats", {"json": ["bankingAgent"]}),
        ("GET", "/v1/chats/not-a-uuid", {}),
        ("GET", "/v1/chats", {"params": {"limit": 10**12}}),
        ("GET", "/v1/chats", {"params": {"cursor": "%%%"}}),
        ("GET", "/v1/interrupts", {"params": {"limit": -1}}),
        ("GET", "/v1/decisions", {"params": {"since": "yesterday"}}),
        ("GET", "/v1/decisions/export", {"params": {"format": "xml"}}),
    ],
)
def test_invalid_request(raw: httpx.Client, method: str, path: str, kwargs: dict[str, Any]) -> None:
    response = raw.request(method, path, **kwargs)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"


def test_blank_message_and_bad_resume_body(
    raw: httpx.Client, waiting: tuple[Chat, Respond]
) -> None:
    chat, _ = waiting
    blank = raw.post(f"/v1/chats/{chat.id}/messages", json={"text": "   "})
    extra = raw.post(f"/v1/chats/{chat.id}/resume", json={"respond": [], "approve": True})
    for response in (blank, extra):
        assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_request")


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_not_sent_as_json_says_so(raw: httpx.Client, kind: str | None) -> None:
    headers = {"content-type": kind} if kind else {}
    answer = raw.post("/v1/chats", content=b'{"agent": "bankingAgent"}', headers=headers)
    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "invalid_request")
    assert "Content-Type: application/json" in answer.json()["error"]["message"]
    assert (kind or "no content type") in answer.json()["error"]["message"]


def test_an_empty_resume_names_every_kind_of_entry(
    raw: httpx.Client, waiting: tuple[Chat, Respond]
) -> None:
    chat, _ = waiting
    message = raw.post(f"/v1/chats/{chat.id}/resume", json={}).json()["error"]["message"]
    assert "respond, restart, approve, edit or reject" in message


def test_oversized_body_and_unknown_routes(raw: httpx.Client) -> None:
    big = raw.post("/v1/chats", json={"agent": "bankingAgent", "metadata": {"x": "y" * 2_000_000}})
    assert (big.status_code, big.json()["error"]["code"]) == (413, "payload_too_large")
    assert raw.get("/v2/chats").json()["error"]["code"] == "not_found"
    assert raw.delete("/v1/chats").json()["error"]["code"] == "method_not_allowed"


def test_chunked_bodies_are_limited_too(raw: httpx.Client) -> None:
    def chunks(n: int) -> Iterator[bytes]:
        yield b'{"agent": "bankingAgent", "metadata": {"x": "'
        yield from (b"y" * 1024 for _ in range(n))
        yield b'"}}'

    big = raw.post("/v1/chats", content=chunks(1100), headers={"content-type": "application/json"})
    assert (big.status_code, big.json()["error"]["code"]) == (413, "payload_too_large")
    ok = raw.post("/v1/chats", content=chunks(2), headers={"content-type": "application/json"})
    assert ok.status_code == 201


def test_hostile_json_and_cursors_are_invalid_requests(raw: httpx.Client) -> None:
    deep = '{"k": ' * 250 + "1" + "}" * 250
    hostile = [
        b'{"agent": "bankingAgent", "metadata": ' + deep.encode() + b"}",
        b'{"agent": "bankingAgent", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"agent": "bankingAgent", "metadata": {"x": Infinity}}',
        b'{"agent": "bankingAgent", "metadata": {"x": "\\ud800"}}',
        b'{"agent": "bankingAgent", "metadata": {"x": ' + b"9" * 5000 + b"}}",
    ]
    for body in hostile:
        answer = raw.post("/v1/chats", content=body, headers={"content-type": "application/json"})
        assert (answer.status_code, answer.json()["error"]["code"]) == (422, "invalid_request"), (
            body[:80]
        )
    forged = base64.urlsafe_b64encode(json.dumps(["2024-01-01T00:00:00+00:00", {"a": 1}]).encode())
    for path in ("/v1/chats", "/v1/interrupts", "/v1/decisions"):
        answer = raw.get(path, params={"cursor": forged.decode().rstrip("=")})
        assert (answer.status_code, answer.json()["error"]["code"]) == (422, "invalid_request")


def test_restart_builder_keeps_replace_input_absent_unless_given() -> None:
    assert "replace_input" not in Restart("r", "t").wire()
    assert Restart("r", "t", replace_input=None).wire()["replace_input"] is None


def test_stale_interrupt(dana: Client) -> None:
    chat = dana.chat("bankingAgent")
    [approval] = chat.send("Transfer $2500 to savings.").interrupts
    [over_limit] = chat.resume(respond=[approval.respond({"approved": True})]).interrupts
    smaller = over_limit.restart(replace_input={"amount": 2000, "to_account": "savings"})
    [changed] = chat.resume(restart=[smaller]).interrupts
    assert changed.ref == over_limit.ref and changed.input_sha256 != over_limit.input_sha256
    with pytest.raises(StaleInterruptError) as caught:
        chat.resume(restart=[over_limit.restart(resumed_metadata={"override": True})])
    assert (caught.value.status, caught.value.details["ref"]) == (409, over_limit.ref)
    done = chat.resume(restart=[changed.restart(resumed_metadata={"override": True})])
    assert done.finish_reason == "stop"
