"""`POST /v1/chats` with `text`: the chat started with its first message, in one request and
one commit, recording what a start and a send would; refused as each of them would be."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from eventsourcing.persistence import Recording

from interlock.client import (
    Client,
    ForbiddenError,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    ModelError,
    TurnInProgressError,
    UnknownAgentError,
)
from tests.api.agents import FLAKY_DOWN, GATES, Gate
from tests.api.conftest import ClientFor, Live

TRANSFER = "Transfer $500 to savings."


def _types(client: Client, chat_id: str) -> list[str]:
    return [e["type"] for e in client.open_chat(chat_id).events()]


def test_a_chat_started_with_its_message_pauses_in_one_commit_and_goes_on(
    live: Live, client_for: ClientFor
) -> None:
    commits: list[list[str]] = []

    def heard(recordings: Sequence[Recording[Any]]) -> None:
        commits.append([type(r.domain_event).__name__ for r in recordings])

    alice, bob = client_for("alice"), client_for("bob")
    two_steps = alice.chat("bankingAgent")
    two_steps.send(TRANSFER)
    live.service.commit_listeners.append(heard)
    try:
        chat, first = alice.start("bankingAgent", TRANSFER, metadata={"customer": "c-42"})
    finally:
        live.service.commit_listeners.remove(heard)

    assert (first.chat_id, first.finish_reason) == (chat.id, "interrupted")
    [asked] = first.interrupts
    assert (asked.name, asked.input["action"]) == ("userApproval", "transfer")
    assert [m["role"] for m in first.messages] == ["user", "model"]
    # one commit: the chat's start is recorded with the turn, not on its own
    assert len(commits) == 1 and commits[0][:2] == ["ChatStarted", "UserMessageSent"]
    assert _types(alice, chat.id) == _types(alice, two_steps.id)  # what start, then send, record
    state = chat.state()
    assert (state["status"], state["metadata"], state["version"]) == (
        "interrupted", {"customer": "c-42"}, first.version)
    # the views fold the start and the turn, committed together, as they fold them apart
    [row] = bob.interrupts(chat_id=chat.id)["items"]
    assert (row["tool"], row["ref"], row["input"]) == ("userApproval", asked.ref, asked.input)
    [listed] = [c for c in alice.chats()["items"] if c["chat_id"] == chat.id]
    assert (listed["status"], listed["pending_count"]) == ("interrupted", 1)

    done = bob.open_chat(chat.id).resume(respond=[asked.respond({"approved": True})])
    assert done.finish_reason == "stop"
    assert done.text.startswith("Done. Your checking balance is now $")


@pytest.mark.parametrize(("body", "named"), [
    ({"agent": "bankingAgent", "text": ""}, "text"),
    ({"agent": "bankingAgent", "text": "x" * 100_001}, "text"),
    ({"agent": "bankingAgent", "max_turns": 2}, "max_turns"),
    ({"agent": "bankingAgent", "text": TRANSFER, "max_turns": 0}, "max_turns"),
    ({"agent": "bankingAgent", "text": 5}, "text"),
])
def test_a_bad_first_message_is_refused_and_writes_nothing(
    live: Live, body: dict[str, Any], named: str
) -> None:
    before = live.service.position()
    answer = httpx.post(f"{live.url}/v1/chats", json=body,
                        headers={"Authorization": "Bearer key-alice"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and named in str(error), error
    assert live.service.position() == before


def test_whom_a_start_refuses_it_refuses_with_a_message_too(
    live: Live, client_for: ClientFor
) -> None:
    before = live.service.position()
    with pytest.raises(UnknownAgentError):
        client_for("alice").start("nobody", TRANSFER)
    with pytest.raises(ForbiddenError):  # an approver asks for nothing
        client_for("bob").start("bankingAgent", TRANSFER)
    with pytest.raises(InvalidRequestError):  # metadata past its bounds
        client_for("alice").start("bankingAgent", TRANSFER, metadata={"k": "v" * 100_000})
    assert live.service.position() == before


def test_a_first_turn_that_fails_is_a_502_naming_the_chat_left_failed(
    client_for: ClientFor
) -> None:
    dana = client_for("dana")
    FLAKY_DOWN.set()
    try:
        with pytest.raises(ModelError) as failed:
            dana.start("flakyAgent", "are you there?", idempotency_key="k-flaky")
    finally:
        FLAKY_DOWN.clear()
    assert failed.value.status == 502
    with pytest.raises(ModelError) as again:  # sent again: the first answer, not a new turn
        dana.start("flakyAgent", "are you there?", idempotency_key="k-flaky")
    assert again.value.details["chat_id"] == failed.value.details["chat_id"]
    chat = dana.open_chat(failed.value.details["chat_id"])
    assert chat.state()["status"] == "failed"
    assert chat.retry().text == "back online"


def test_another_tenant_does_not_see_a_chat_started_with_its_message(
    client_for: ClientFor
) -> None:
    chat, _ = client_for("dana").start("bankingAgent", TRANSFER)
    eve = client_for("eve")
    answer = eve.http.get(f"/v1/chats/{chat.id}")
    assert answer.status_code == 404


def test_a_start_sent_again_under_its_key_answers_the_chat_it_opened(
    live: Live, client_for: ClientFor
) -> None:
    alice, bob = client_for("alice"), client_for("bob")
    chat, first = alice.start("bankingAgent", TRANSFER, idempotency_key="k-1")
    before = live.service.position()
    again_chat, again = alice.start("bankingAgent", TRANSFER, idempotency_key="k-1")
    assert again_chat.id == chat.id and again == first
    assert live.service.position() == before  # nothing written, the model not asked
    [asked] = first.interrupts
    bob.open_chat(chat.id).resume(respond=[asked.respond({"approved": True})])
    # later turns do not change the first answer
    assert alice.start("bankingAgent", TRANSFER, idempotency_key="k-1")[1] == first
    with pytest.raises(IdempotencyKeyReusedError):
        alice.start("bankingAgent", "Transfer $900 to savings.", idempotency_key="k-1")
    with pytest.raises(IdempotencyKeyReusedError):
        alice.start("bankingAgent", TRANSFER, metadata={"k": 1}, idempotency_key="k-1")
    meta, _ = alice.start("bankingAgent", TRANSFER, metadata={"k": 1}, idempotency_key="k-m")
    with pytest.raises(IdempotencyKeyReusedError):  # JSON's true is not 1
        alice.start("bankingAgent", TRANSFER, metadata={"k": True}, idempotency_key="k-m")
    assert alice.start("bankingAgent", TRANSFER, metadata={"k": 1.0},
                       idempotency_key="k-m")[0].id == meta.id  # JSON's 1.0 is 1
    # another principal's key is its own
    other, _ = client_for("dana").start("bankingAgent", TRANSFER, idempotency_key="k-1")
    assert other.id != chat.id
    after = live.service.position()
    refused = httpx.post(f"{live.url}/v1/chats", json={"agent": "bankingAgent"},
                         headers={"Authorization": "Bearer key-alice", "Idempotency-Key": "k-2"})
    assert refused.status_code == 422 and "Idempotency-Key" in refused.json()["error"]["message"]
    assert live.service.position() == after


def test_a_start_sent_again_while_its_first_turn_runs_is_409_naming_the_chat(
    client_for: ClientFor
) -> None:
    """Before its first commit too: the model is held before anything is recorded."""
    alice = client_for("alice")
    GATES["open-1"] = gate = Gate()
    first: list[Any] = []
    running = threading.Thread(target=lambda: first.append(
        alice.start("gateAgent", "hold-model open-1", idempotency_key="k-held")))
    running.start()
    try:
        assert gate.entered.wait(10)
        with pytest.raises(TurnInProgressError) as busy:
            alice.start("gateAgent", "hold-model open-1", idempotency_key="k-held")
    finally:
        gate.release.set()
        running.join(10)
    [(chat, answer)] = first
    assert busy.value.status == 409 and busy.value.details["chat_id"] == chat.id
    assert alice.start("gateAgent", "hold-model open-1", idempotency_key="k-held")[1] == answer
