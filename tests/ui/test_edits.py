"""An edit of a held call: a required reason, kept in the event; every later viewer sees
old -> new per changed field, who changed it and why, and the conversation's current input.

treasuryBankingAgent holds a transfer over 1000 until two of role treasury approve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse

Api = Callable[[str], Client]


def _held_transfer(api: Api) -> tuple[str, str]:
    chat = api("alice").chat("treasuryBankingAgent")
    [ask] = chat.send("Transfer $1500 to savings.").interrupts
    [held] = api("bob").open_chat(chat.id).resume(
        respond=[ask.respond({"approved": True})]).interrupts
    return chat.id, held.ref


def _votes(api: Api, chat_id: str) -> list[dict[str, Any]]:
    events = api("root").open_chat(chat_id).events()
    return [e["data"] for e in events if e["type"] == "ApprovalVoted"]


def test_an_edit_needs_a_reason_and_every_later_viewer_sees_old_new_who_and_why(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _held_transfer(api)
    url = f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}"
    tina = signed_in("tina")
    tina.goto(url)
    tina.locator("#edit-amount").fill("900")
    reason = tina.get_by_label("Why you changed it")
    expect(reason).to_have_attribute("required", "")
    tina.get_by_role("button", name="Save the edited input").click()
    assert tina.url == url  # the browser asks for the reason first
    tina.evaluate("document.querySelector('form[action$=\"/edit\"]').noValidate = true")
    reason.fill("   ")
    tina.get_by_role("button", name="Save the edited input").click()
    expect(tina.locator("#edit-errors li")).to_contain_text("reason: give a reason for the edit")
    assert _votes(api, chat_id) == []
    tina.get_by_label("Why you changed it").fill("over the daily limit")
    tina.get_by_role("button", name="Save the edited input").click()
    expect(tina.locator("#notice")).to_contain_text("Your edit is recorded")
    [vote] = _votes(api, chat_id)
    assert (vote["vote"], vote["reason"]) == ("edit", "over the daily limit")

    tom = signed_in("tom")
    tom.goto(url)
    edits = tom.locator("#edits > li")
    expect(edits).to_have_count(1)
    expect(edits).to_contain_text("tina changed the input at ")
    expect(edits).to_contain_text("“over the daily limit”")
    expect(edits.locator(".change")).to_have_text(["amount: 1500.0 → 900.0"])
    expect(tom.locator("#asked-by")).to_have_text("alice")
    expect(tom.locator("#changed-by")).to_have_text("tina")
    expect(tom.locator("#policy-requester")).to_contain_text("tina, who changed the input")
    request = tom.locator(f'[data-request="{ref}"]')
    expect(request).to_contain_text('"amount": 900.0')
    expect(request).to_contain_text("changed by tina")
