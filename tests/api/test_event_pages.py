"""A chat's event log comes in pages (keyset by version); another tenant's chat is refused
after reading its first event only."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from interlock.client import Client
from tests.api.conftest import ClientFor, Live


def _page(live: Live, chat_id: str, **params: Any) -> Any:
    response = httpx.get(f"{live.url}/v1/chats/{chat_id}/events", params=params,
                         headers={"Authorization": "Bearer key-alice"})
    assert response.status_code == 200, response.text
    return response.json()


def test_the_event_log_pages_by_version(live: Live, client_for: ClientFor) -> None:
    alice: Client = client_for("alice")
    chat = alice.chat("opsAgent")
    chat.send("hello")
    everything = chat.events()
    assert len(everything) >= 4
    seen, after, pages = [], 0, 0
    while True:
        page = _page(live, chat.id, after=after, limit=2)
        assert len(page["events"]) <= 2
        seen.extend(page["events"])
        pages += 1
        if page["next_cursor"] is None:
            break
        after = int(page["next_cursor"])
    assert seen == everything and pages == (len(everything) + 1) // 2
    assert [e["version"] for e in seen] == list(range(1, len(seen) + 1))
    assert _page(live, chat.id, after=len(seen)) == {"chat_id": chat.id, "events": [],
                                                      "next_cursor": None}


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"after": -1},
                                    {"after": "x"}])
def test_bad_page_parameters_are_refused(live: Live, client_for: ClientFor,
                                         params: dict[str, Any]) -> None:
    chat = client_for("alice").chat("opsAgent")
    response = httpx.get(f"{live.url}/v1/chats/{chat.id}/events", params=params,
                         headers={"Authorization": "Bearer key-alice"})
    assert response.status_code == 422


def test_another_tenants_chat_is_refused_after_its_first_event(
    live: Live, client_for: ClientFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = client_for("alice").chat("opsAgent")
    chat.send("hello")
    reads: list[dict[str, Any]] = []
    original = live.service.events.get

    def spy(*args: Any, **kwargs: Any) -> Any:
        reads.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(live.service.events, "get", spy)
    response = httpx.get(f"{live.url}/v1/chats/{chat.id}/events",
                         headers={"Authorization": "Bearer key-eve"})
    assert response.status_code == 404
    assert reads == [{"lte": 1}]  # the first event only, whatever the chat's size


def test_a_banking_cycle_lists_each_tool_request_before_its_interrupt(
    live: Live, client_for: ClientFor
) -> None:
    chat = client_for("alice").chat("bankingAgent")
    [approval] = chat.send("Transfer $120 to savings.").interrupts
    client_for("bob").open_chat(chat.id).resume(respond=[approval.respond({"approved": True})])
    events = _page(live, chat.id)["events"]
    assert [e["type"] for e in events] == [
        "ChatStarted", "UserMessageSent", "ModelResponded", "ToolRequested", "Interrupted",
        "TurnFinished", "Responded", "ModelResponded", "ToolRequested", "ToolCompleted",
        "ModelResponded", "TurnFinished"]
    asked, held = events[3]["data"], events[4]["data"]
    assert (asked["ref"], asked["name"], held["ref"]) == (approval.ref, "userApproval",
                                                          approval.ref)
    assert asked["input"] == approval.input
