"""A data policy change under four eyes in a real Chromium: pia (policy_admin, her browser in
Tokyo) proposes version 1 of payAgent's pay policy on the policies page, from a time typed in
her zone; her own approval is refused with the server's reason; ray (policy_admin too)
reviews and approves it; a new payment is then held under it and its page names the version.
tests/ui/test_policy_pages.py covers the refusals and CSRF over plain HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse, sign_in

Api = Callable[[str], Client]
LEADS = {"roles": ["lead"], "when": {"path": "amount", "op": ">", "value": 1000}}


@pytest.fixture
def in_tokyo(browser: Browser, live: Live) -> Iterator[Callable[[str], Page]]:
    """`in_tokyo("pia")`: a page of a browser whose time zone is Asia/Tokyo, signed in."""
    contexts: list[BrowserContext] = []

    def open_as(name: str) -> Page:
        contexts.append(browser.new_context(timezone_id="Asia/Tokyo"))
        page = contexts[-1].new_page()
        sign_in(page, live.url, f"key-{name}")
        page.wait_for_url("**/ui/inbox**")
        return page

    yield open_as
    for c in contexts:
        c.close()


def test_a_policy_change_proposed_by_one_is_approved_by_another_and_holds_new_calls(
    in_tokyo: Callable[[str], Page], signed_in: Browse, api: Api, live: Live
) -> None:
    pia = in_tokyo("pia")
    pia.get_by_role("navigation", name="Console").get_by_role("link", name="Policies").click()
    expect(pia.locator("#no-policies")).to_be_visible()
    form = pia.locator("#propose-form")
    expect(form.locator("[data-zone-note]")).to_have_text("times in Asia/Tokyo")
    form.get_by_label("Policy id").fill("pay-limits")
    form.get_by_label("Agent").select_option("payAgent")
    form.get_by_label("Tool").fill("pay")
    form.get_by_label("Policy document (JSON)").fill(json.dumps(LEADS, indent=2))
    start = (datetime.now(UTC) - timedelta(minutes=2)).replace(second=0, microsecond=0)
    form.get_by_label("In force from").fill(
        start.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%dT%H:%M"))
    form.get_by_label("Reason").fill("leads decide payments over 1,000")
    form.get_by_role("button", name="Propose the version").click()
    expect(pia.locator("#notice")).to_contain_text("Version 1 is proposed.")
    [v1] = api("pia").request("GET", "/v1/policies")["items"]
    assert (v1["state"], v1["proposed_by"], datetime.fromisoformat(v1["effective_from"])) == (
        "proposed", "pia", start)  # typed in Tokyo, kept as the same instant
    expect(pia.locator('#diff tr[data-field="roles"] .new')).to_have_text('["lead"]')
    expect(pia.locator("#approve-hint")).to_contain_text("someone else must approve it")
    pia.get_by_role("button", name="Approve version 1").click()
    expect(pia.locator("#refusal")).to_have_text(
        "Refused by the server: pia proposed policy pay-limits version 1; someone else must"
        " approve it.")
    assert api("pia").request("GET", "/v1/policies")["items"][0]["state"] == "proposed"

    ray = signed_in("ray")
    ray.get_by_role("navigation", name="Console").get_by_role("link", name="Policies").click()
    row = ray.locator('#policy-pay-limits tr[data-version="1"]')
    expect(row).to_have_attribute("data-state", "proposed")
    row.get_by_role("link", name="version 1").click()
    expect(ray.locator("#whatif-counts")).to_contain_text("0 calls read")
    ray.locator("#approve-form").get_by_label("Reason").fill("limits reviewed with the committee")
    ray.get_by_role("button", name="Approve version 1").click()
    expect(ray.locator("#notice")).to_have_text("Version 1 is approved.")
    expect(ray.locator("#version-state")).to_contain_text("approved, in force from")
    expect(ray.locator("#version-approved")).to_contain_text("by ray at")

    chat = api("alice").chat("payAgent")  # a new call: held under version 1, by a lead
    [held] = chat.send("pay 5000 bob-corp").interrupts
    assert held.approval["terms"]["policy"] == {"id": "pay-limits", "version": 1,
                                                "proposed_by": "pia", "approved_by": "ray"}
    lee = signed_in("lee")
    lee.goto(f"{live.url}/ui/chats/{chat.id}/interrupts/{held.ref}")
    expect(lee.locator("#policy-version")).to_have_text(
        "pay-limits version 1, proposed by pia, approved by ray")
    expect(lee.locator("#policy-deciders")).to_contain_text("role lead")
    ray.goto(f"{live.url}/ui/policies")
    expect(row).to_have_attribute("data-state", "in_force")
    expect(row).to_contain_text("by ray at")
