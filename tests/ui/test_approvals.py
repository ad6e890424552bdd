"""Approval policies in a real Chromium: votes, quorum, reasons, edits, refusals, races.

payAgent's pay tool is held when the amount is over 100 until two of role `treasury`
approve (tina and tom); its scripted model echoes the tool's response into its reply, so
the chat shows exactly what the model received.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from uuid import UUID

from playwright.sync_api import Page, expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse, ConsoleLive, accept_dialogs

Api = Callable[[str], Client]
FORCE_OPEN = ("document.querySelectorAll('[disabled]').forEach(e => {"
              "e.disabled = false; e.removeAttribute('aria-disabled'); })")


def _pay(api: Api, who: str, amount: int, to: str = "bob") -> tuple[str, str]:
    """`who` asks payAgent to pay; the chat id and the held call's ref."""
    chat = api(who).chat("payAgent")
    [held] = chat.send(f"pay {amount} {to}").interrupts
    return chat.id, held.ref


def _events(api: Api, chat_id: str) -> list[dict[str, Any]]:
    return list(api("root").open_chat(chat_id).events())


def _kinds(api: Api, chat_id: str) -> list[str]:
    return [e["type"] for e in _events(api, chat_id)]


def _open(page: Page, live: Live, chat_id: str, ref: str) -> str:
    url = f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}"
    page.goto(url)
    return url


def test_a_quorum_counts_one_vote_then_the_second_runs_it_and_the_chat_shows_the_answer(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "alice", 500)
    tina = signed_in("tina")
    row = tina.locator(f'#inbox-rows tr[data-ref="{ref}"]')
    expect(row.locator(".tally")).to_have_text("0 of 2 approvals")
    expect(row.locator(".left")).to_have_text(re.compile(r"^\d+ min left$"))
    row.get_by_role("link", name="pay").click()
    expect(tina.locator("#policy-deciders")).to_contain_text("role treasury")
    expect(tina.locator("#policy-tally")).to_have_text("0 of 2 approvals so far")
    expect(tina.locator("#policy-requester")).to_contain_text("alice")
    expect(tina.locator("#policy-deadline")).to_contain_text("min left")
    expect(tina.locator("#votes")).to_contain_text("None yet")
    tina.get_by_role("button", name="Approve").click()
    expect(tina.locator("#notice")).to_have_text(
        "Your approval is recorded. 1 of 2 approvals on this input so far. "
        "The tool has not run: it waits for 1 more approval.")
    expect(tina.locator("#policy-tally")).to_have_text("1 of 2 approvals so far")
    expect(tina.locator("#votes li")).to_have_count(1)
    expect(tina.locator("#votes")).to_contain_text("approve by tina")
    expect(tina.locator("#status")).to_have_text("pending")
    expect(tina.locator("#why-not")).to_contain_text("tina already voted (approve)")
    assert "ToolCompleted" not in _kinds(api, chat_id)
    tina.goto(f"{live.url}/ui/inbox")
    expect(row.locator(".tally")).to_have_text("1 of 2 approvals")
    tina.get_by_label("Show").select_option("mine")  # she has voted: nothing left for her
    tina.get_by_role("button", name="Filter").click()
    expect(row).to_have_count(0)

    tom = signed_in("tom")
    tom.goto(f"{live.url}/ui/inbox?show=mine")
    tom.locator(f'#inbox-rows tr[data-ref="{ref}"]').get_by_role("link", name="pay").click()
    tom.get_by_role("button", name="Approve").click()
    expect(tom.locator("#outcome")).to_be_focused()  # the vote that settles it says so
    expect(tom.locator("#outcome-happened")).to_contain_text(
        "the quorum was met (tina, tom)")
    expect(tom.locator("#outcome-then")).to_have_text(
        'The tool ran and returned {"paid": 500, "to": "bob"}.')
    expect(tom.locator("#outcome-reply")).to_contain_text("outcome: {'paid': 500")
    expect(tom.locator(".msg.tool")).to_contain_text('"paid": 500')
    expect(tom.locator(".msg.model").last).to_have_text(
        re.compile(r"outcome: \{'paid': 500, 'to': 'bob'\}"))
    voted = [e for e in _events(api, chat_id) if e["type"] == "ApprovalVoted"]
    assert [(e["actor"], e["data"]["outcome"]) for e in voted] == [
        ("tina", "pending"), ("tom", "approved")]


def test_a_rejections_reason_reaches_the_model(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "alice", 700)
    tina = signed_in("tina")
    url = _open(tina, live, chat_id, ref)
    reject = tina.get_by_role("button", name="Reject")
    reject.click()  # no reason: the browser refuses to submit
    expect(tina.locator('.field-error[data-for="reject-reason"]')).not_to_be_empty()
    expect(tina.get_by_label("Reason")).to_have_attribute("aria-invalid", "true")
    assert tina.url == url
    # A blank reason that skips the browser's checks is refused by the server, in the form.
    tina.get_by_label("Reason").fill("   ")
    tina.evaluate("document.querySelector('form[action$=\"/reject\"]').submit()")
    expect(tina.locator("#reject-errors li")).to_contain_text(
        "reason: String should have at least 1 character")
    expect(tina.get_by_label("Reason")).to_be_focused()  # the refused field, for the keyboard
    expect(tina.get_by_label("Reason")).to_have_attribute("aria-invalid", "true")
    assert "ApprovalVoted" not in _kinds(api, chat_id)
    tina.get_by_label("Reason").fill("over this month's budget")
    tina.keyboard.press("Tab")  # from the reason to its Reject button, by keyboard alone
    expect(reject).to_be_focused()
    tina.keyboard.press("Enter")
    expect(tina.locator("#outcome-happened")).to_contain_text(
        "Rejected by tina at ")
    expect(tina.locator("#outcome-happened")).to_contain_text("“over this month's budget”")
    expect(tina.locator("#outcome-then")).to_contain_text(
        "The tool did not run; the agent was told no, and why.")
    expect(tina.locator(".msg.model").last).to_contain_text(
        "'rejected': True, 'by': 'tina', 'reason': \"over this month's budget\"")
    [voted] = [e for e in _events(api, chat_id) if e["type"] == "ApprovalVoted"]
    assert (voted["data"]["vote"], voted["data"]["outcome"]) == ("reject", "rejected")


def _held_transfer(api: Api) -> tuple[str, str]:
    """A $1500 transfer of treasuryBankingAgent, past userApproval, held for treasury."""
    chat = api("alice").chat("treasuryBankingAgent")
    [ask] = chat.send("Transfer $1500 to savings.").interrupts
    [held] = api("bob").open_chat(chat.id).resume(
        respond=[ask.respond({"approved": True})]).interrupts
    return chat.id, held.ref


def test_an_edited_input_is_validated_then_its_editor_may_not_approve_it(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _held_transfer(api)
    tina = signed_in("tina")
    url = _open(tina, live, chat_id, ref)
    save = tina.get_by_role("button", name="Save the edited input")
    expect(tina.locator("#edit-amount")).to_have_value("1500.0")
    tina.locator("#edit-to_account").fill("")
    save.click()
    expect(tina.locator('.field-error[data-for="edit-to_account"]')).not_to_be_empty()
    assert tina.url == url  # the browser did not submit
    tina.locator("#edit-to_account").fill("savings")
    tina.get_by_label("Why you changed it").fill("the daily limit")
    tina.locator("#edit-amount").fill("-5")  # the schema says amount > 0; the browser cannot
    save.click()
    expect(tina.locator("#edit-errors li")).to_contain_text(
        "amount: Input should be greater than 0")
    expect(tina.locator("#edit-amount")).to_have_attribute("aria-invalid", "true")
    expect(tina.locator("#edit-amount")).to_have_value("-5")
    assert "ApprovalVoted" not in _kinds(api, chat_id)
    tina.locator("#edit-amount").fill("900")
    save.click()
    expect(tina.locator("#notice")).to_contain_text("Your edit is recorded")
    expect(tina.locator("#notice")).to_contain_text(
        "The tool has not run: it waits for 2 more approvals.")
    expect(tina.locator("#input-json")).to_contain_text('"amount": 900.0')
    expect(tina.locator("#policy-requester")).to_contain_text("tina")
    # Four-eyes: tina asked for this input now; the page says so and the server refuses.
    expect(tina.locator("#why-not")).to_contain_text(
        "Four-eyes: tina last replaced its input")
    expect(tina.get_by_role("button", name="Approve")).to_be_disabled()
    tina.evaluate(FORCE_OPEN)
    tina.get_by_role("button", name="Approve").click()
    expect(tina.locator("#notice")).to_contain_text(
        "Refused by the server: tina last replaced its input")
    expect(tina.locator("#status")).to_have_text("pending")
    voted = [e for e in _events(api, chat_id) if e["type"] == "ApprovalVoted"]
    assert [(e["actor"], e["data"]["vote"]) for e in voted] == [("tina", "edit")]
    assert voted[0]["data"]["edited_input"] == {"amount": 900.0, "to_account": "savings"}


def test_routing_and_four_eyes_refusals_show_the_servers_reason(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "root", 300)  # an admin may decide anything but their own ask
    bob = signed_in("bob")  # an approver, but the policy names treasury
    _open(bob, live, chat_id, ref)
    expect(bob.locator("#why-not")).to_contain_text(
        "Routing: bob may not decide pay")
    expect(bob.locator("#why-not")).to_contain_text("the role treasury")
    bob.evaluate(FORCE_OPEN)
    bob.get_by_role("button", name="Approve").click()
    expect(bob.locator("#notice")).to_contain_text(
        "Refused by the server: bob may not decide pay")
    root = signed_in("root")
    _open(root, live, chat_id, ref)
    expect(root.locator("#why-not")).to_contain_text("Four-eyes: root sent the turn")
    expect(root.get_by_label("Reason")).to_be_disabled()
    assert "ApprovalVoted" not in _kinds(api, chat_id)


def test_a_vote_on_a_chat_whose_erasure_began_is_refused_with_the_servers_reason(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "alice", 300)
    tina = signed_in("tina")
    _open(tina, live, chat_id, ref)
    assert isinstance(live, ConsoleLive)
    live.service.begin_erasure(UUID(chat_id), actor="operator")  # what `audit erase` does first
    tina.get_by_role("button", name="Approve").click()
    expect(tina.locator("#notice")).to_contain_text(
        f"Refused by the server: chat {chat_id}'s personal data is erased or being erased")
    assert "ApprovalVoted" not in _kinds(api, chat_id)


def test_a_vote_cast_elsewhere_meanwhile_is_a_clear_message(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "alice", 400)
    tina = signed_in("tina")
    _open(tina, live, chat_id, ref)
    second_tab = tina.context.new_page()  # still shows the forms after the first tab's 409
    second_tab.on("dialog", accept_dialogs)  # its rejection ends the call: confirmed
    _open(second_tab, live, chat_id, ref)
    api("tina").request("POST", f"/v1/chats/{chat_id}/resume", json={
        "approve": [{"ref": ref, "name": "pay"}]})
    tina.get_by_role("button", name="Approve").click()
    expect(tina.locator("#notice")).to_contain_text(
        "You already voted (approve) on this input")
    expect(tina.locator("#policy-tally")).to_have_text("1 of 2 approvals so far")
    api("tom").request("POST", f"/v1/chats/{chat_id}/resume", json={
        "reject": [{"ref": ref, "name": "pay", "reason": "duplicate payment"}]})
    second_tab.get_by_label("Reason").fill("changed my mind")
    second_tab.get_by_role("button", name="Reject").click()
    expect(second_tab.locator("#notice")).to_contain_text(
        "Someone decided this meanwhile: reject by tom")
    expect(second_tab.locator("#votes")).to_contain_text("“duplicate payment”")
    expect(second_tab.locator("#decided")).to_contain_text("reject by tom")
    expect(second_tab.locator("#policy-outcome")).to_have_text("rejected")
    voted = [e for e in _events(api, chat_id) if e["type"] == "ApprovalVoted"]
    assert [(e["actor"], e["data"]["vote"]) for e in voted] == [
        ("tina", "approve"), ("tom", "reject")]
