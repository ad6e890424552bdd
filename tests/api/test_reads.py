"""The inbox, the decision log, chat lists and health: a write is visible to the next read."""

from __future__ import annotations

import json
import threading
import uuid

import httpx
import pytest
from eventsourcing.persistence import Recording

from interlock.client import Client
from tests.api.agents import GATES, Gate
from tests.api.conftest import ClientFor, Live


@pytest.fixture
def dana(client_for: ClientFor) -> Client:
    return client_for("dana")


def test_inbox_and_decisions_follow_each_write(dana: Client, client_for: ClientFor) -> None:
    chat = dana.chat("bankingAgent")
    [approval] = chat.send("Transfer $500 to savings.").interrupts
    bob = client_for("bob")
    [row] = bob.interrupts(chat_id=chat.id, tool="userApproval")["items"]
    assert (row["ref"], row["requested_by"], row["tenant"]) == (approval.ref, "dana", "acme")

    bob.open_chat(chat.id).resume(respond=[approval.respond({"approved": True})])

    assert bob.interrupts(chat_id=chat.id)["items"] == []
    [decision] = bob.decisions(chat_id=chat.id)["items"]
    assert (decision["actor"], decision["kind"]) == ("bob", "respond")
    assert decision["tool"] == "userApproval"
    stats = bob.decision_stats(chat_id=chat.id)
    assert (stats["total"], stats["by_actor"]) == (1, {"bob": 1})


def test_chat_list_pages_newest_first(dana: Client) -> None:
    first, second = dana.chat("bankingAgent"), dana.chat("bankingAgent")
    second.send("hello")
    page = dana.chats(agent="bankingAgent", limit=1)
    assert [c["chat_id"] for c in page["items"]] == [second.id]
    rest = dana.chats(agent="bankingAgent", limit=1, cursor=page["next_cursor"])
    assert rest["items"][0]["chat_id"] == first.id
    [waiting] = dana.chats(status="idle", limit=500)["items"][:1]
    assert waiting["status"] == "idle"


def test_export_streams_csv_and_jsonl(live: Live, dana: Client) -> None:
    chat = dana.chat("bankingAgent")
    [approval] = chat.send("Transfer $500 to savings.").interrupts
    chat.resume(respond=[approval.respond({"approved": True})])
    headers = {"Authorization": "Bearer key-carol"}
    params = {"chat_id": chat.id}
    with httpx.Client(base_url=live.url, headers=headers) as auditor:
        lines = auditor.get("/v1/decisions/export", params=params).text.splitlines()
        table = auditor.get("/v1/decisions/export", params={**params, "format": "csv"})
    assert [json.loads(line)["ref"] for line in lines] == [approval.ref]
    assert table.headers["content-type"].startswith("text/csv")
    assert len(table.text.splitlines()) == 2


def test_chat_as_of_a_version(dana: Client) -> None:
    chat = dana.chat("bankingAgent")
    chat.send("hello")
    assert chat.state(version=1)["messages"] == []
    assert chat.state()["messages"][0]["content"] == [{"text": "hello"}]


def test_health_and_readiness(live: Live) -> None:
    with httpx.Client(base_url=live.url) as anonymous:
        assert anonymous.get("/healthz").json() == {
            "status": "ok", "store": None, "store_reason": None, "views": None, "stuck": None,
            "notifications_failed": None}
        ready = anonymous.get("/readyz")
    assert (ready.status_code, ready.json()["status"]) == (200, "ready")


def test_a_disconnected_stream_loses_nothing(live: Live, dana: Client) -> None:
    token = uuid.uuid4().hex
    gate = GATES[token] = Gate()
    chat = dana.chat("gateAgent")
    finished = threading.Event()

    def on_commit(recordings: list[Recording[uuid.UUID]]) -> None:
        if any(type(r.domain_event).__name__ == "TurnFinished"
               and str(r.domain_event.originator_id) == chat.id for r in recordings):
            finished.set()

    live.service.commit_listeners.append(on_commit)
    try:
        events = chat.stream(f"hold-tool {token}")
        assert next(events).type == "tool_request"
        events.close()  # the client goes away while the tool runs
        gate.release.set()
        assert finished.wait(10)
    finally:
        live.service.commit_listeners.remove(on_commit)
        del GATES[token]
    state = chat.state()
    assert (state["status"], state["messages"][-1]["content"][0]["text"]) == ("idle", "gate done")
