"""Staged approvals and delegation in a real Chromium.

wireAgent's wire tool passes three stages: the team lead (lee), then treasury (tina), then,
over 100,000, the CFO (cora). A delegation granted on the delegation page lets bob vote for
cora; his vote then reads "for cora, by delegation D" and counts as hers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from playwright.sync_api import Page, expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse

Api = Callable[[str], Client]


def _wire(api: Api, amount: int) -> tuple[str, str]:
    chat_id, held = _held_wire(api, amount)
    return chat_id, held.ref


def _held_wire(api: Api, amount: int) -> tuple[str, Any]:
    chat = api("alice").chat("wireAgent")
    [held] = chat.send(f"wire {amount} acme").interrupts
    return chat.id, held


def _votes(api: Api, chat_id: str) -> list[dict[str, Any]]:
    return [e for e in api("root").open_chat(chat_id).events() if e["type"] == "ApprovalVoted"]


def _stage(page: Page, n: int) -> Any:
    return page.locator(f'#stages li[data-stage="{n}"]')


def _approve_from_the_inbox(page: Page, live: Live, ref: str, stage: str) -> None:
    """The approver finds the call among what they may decide, at the stage named, and
    approves it."""
    page.goto(f"{live.url}/ui/inbox?show=mine")
    row = page.locator(f'#inbox-rows tr[data-ref="{ref}"]')
    expect(row.locator(".stage")).to_have_text(stage)
    row.get_by_role("link", name="wire").click()
    expect(page.locator("#policy-stage")).to_have_text(stage)
    page.get_by_role("button", name="Approve").click()


def test_a_three_stage_approval_passes_stage_by_stage_by_three_people(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _wire(api, 250_000)
    lee = signed_in("lee")
    _approve_from_the_inbox(lee, live, ref, "stage 1 of 3: team lead")
    expect(lee.locator("#notice")).to_have_text(
        "Your approval is recorded. It waits in stage 2 of 3: treasury (0 of 1 approval so "
        "far). The tool has not run.")
    expect(_stage(lee, 1)).to_have_attribute("data-status", "approved")
    expect(_stage(lee, 1).locator(".stage-votes")).to_contain_text("approved by lee at")
    expect(_stage(lee, 2)).to_have_attribute("aria-current", "step")
    expect(_stage(lee, 2)).to_contain_text("waiting now")
    expect(_stage(lee, 3)).to_contain_text("to come")
    expect(lee.locator("#why-not")).to_contain_text("Routing: lee may not decide wire")
    assert [(v["actor"], v["data"]["stage"], v["data"].get("next_stage"))
            for v in _votes(api, chat_id)] == [("lee", 0, 1)]

    tina = signed_in("tina")
    _approve_from_the_inbox(tina, live, ref, "stage 2 of 3: treasury")
    expect(tina.locator("#notice")).to_contain_text("It waits in stage 3 of 3: CFO")
    expect(_stage(tina, 2).locator(".stage-votes")).to_contain_text("approved by tina at")
    expect(_stage(tina, 3)).to_have_attribute("data-status", "waiting")
    expect(tina.locator("#policy-deciders")).to_contain_text("role cfo")

    cora = signed_in("cora")
    _approve_from_the_inbox(cora, live, ref, "stage 3 of 3: CFO")  # settles it: confirmed
    expect(cora.locator("#outcome")).to_be_focused()
    expect(cora.locator("#outcome-then")).to_have_text(
        'The tool ran and returned {"paid": 250000, "to": "acme"}.')
    expect(cora.locator("#stages > li")).to_have_count(3)
    for n, who in ((1, "lee"), (2, "tina"), (3, "cora")):
        expect(_stage(cora, n)).to_have_attribute("data-status", "approved")
        expect(_stage(cora, n).locator(".stage-votes")).to_contain_text(f"approved by {who}")
    assert [(v["actor"], v["data"]["stage"], v["data"]["outcome"])
            for v in _votes(api, chat_id)] == [
        ("lee", 0, "pending"), ("tina", 1, "pending"), ("cora", 2, "approved")]


def test_a_call_under_the_threshold_shows_the_cfo_skipped_and_two_stages_decide_it(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _wire(api, 900)
    lee = signed_in("lee")
    _approve_from_the_inbox(lee, live, ref, "stage 1 of 3: team lead")
    expect(_stage(lee, 3)).to_have_attribute("data-status", "skipped")
    expect(_stage(lee, 3)).to_contain_text("skipped: does not apply to this input")
    tina = signed_in("tina")
    _approve_from_the_inbox(tina, live, ref, "stage 2 of 3: treasury")
    expect(tina.locator("#outcome-then")).to_contain_text('"paid": 900')
    assert [(v["actor"], v["data"]["stage"], v["data"]["outcome"])
            for v in _votes(api, chat_id)] == [("lee", 0, "pending"), ("tina", 1, "approved")]


def test_a_delegation_granted_on_the_page_lets_the_delegate_approve_for_the_delegator(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, held = _held_wire(api, 300_000)
    ref = held.ref
    cora = signed_in("cora")
    cora.get_by_role("navigation", name="Console").get_by_role(
        "link", name="Delegations").click()
    expect(cora.locator("#by-me tbody")).to_contain_text("None.")
    form = cora.locator("#grant")
    form.get_by_label("Delegate").fill("bob")
    expect(form.get_by_label("role cfo")).to_be_checked()
    until = (datetime.now(UTC) + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    form.get_by_label("Until").fill(until)
    form.get_by_label("Reason").fill("on leave this week")
    form.get_by_role("button", name="Grant the delegation").click()
    expect(cora.locator("#notice")).to_contain_text("is granted.")
    [granted] = api("cora").request("GET", "/v1/delegations")["items"]
    d, short = granted["id"], granted["id"][:8]
    row = cora.locator(f'#by-me tr[data-delegation="{d}"]')
    expect(row).to_contain_text("bob")
    expect(row.locator(".scope")).to_have_text("role cfo")
    expect(row.locator(".state")).to_contain_text("in force")
    assert (granted["delegate"], granted["roles"], granted["reason"]) == (
        "bob", ["cfo"], "on leave this week")

    for who in ("lee", "tina"):  # the first two stages, from elsewhere
        api(who).request("POST", f"/v1/chats/{chat_id}/resume", json={"approve": [
            {"ref": ref, "name": "wire", "input_sha256": held.input_sha256}]})

    bob = signed_in("bob")
    bob.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    expect(bob.locator("#why-not")).to_contain_text(
        "You (bob) may not vote yourself, only by a delegation to you (below).")
    choice = bob.locator("#approve-delegation")
    expect(choice.locator("option")).to_have_text([f"vote for cora by delegation {short}"])
    expect(bob.get_by_role("button", name="Approve")).to_be_enabled()
    bob.get_by_role("button", name="Approve").click()
    expect(bob.locator("#outcome")).to_be_focused()
    vote = bob.locator("#votes li").last
    expect(vote).to_contain_text(f"approve by bob for cora, by delegation {short}")
    expect(_stage(bob, 3).locator(".stage-votes")).to_contain_text(
        f"approved by bob for cora, by delegation {short}")
    last = _votes(api, chat_id)[-1]
    assert (last["actor"], last["data"]["for_actor"], last["data"]["delegation_id"],
            last["data"]["outcome"]) == ("bob", "cora", d, "approved")

    bob.goto(f"{live.url}/ui/delegations")  # the delegate sees it, and cannot revoke it
    expect(bob.locator(f'#to-me tr[data-delegation="{d}"]')).to_contain_text("cora")
    expect(bob.get_by_role("button", name=re.compile("^Revoke"))).to_have_count(0)
    cora.reload()
    cora.get_by_role("button", name=f"Revoke delegation {short}").click()
    expect(cora.locator("#notice")).to_have_text(f"Delegation {short} is revoked.")
    expect(row.locator(".state")).to_contain_text("revoked by cora at")
