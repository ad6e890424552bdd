"""Clipped values open in full; the inbox's count agrees with its filter, which clears."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse

Api = Callable[[str], Client]
LONG = "the quarterly budget of the northern region, line by line, " * 3 + "THE END"


def test_a_clipped_input_opens_in_full_in_the_inbox_and_the_conversation(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat = api("alice").chat("formsAgent")
    [review] = chat.send(LONG).interrupts
    bob = signed_in("bob")
    cell = bob.locator(f'#inbox-rows tr[data-ref="{review.ref}"] details.clip')
    expect(cell.locator("pre.full")).not_to_be_visible()
    cell.locator("summary").click()
    expect(cell.locator("pre.full")).to_be_visible()
    expect(cell.locator("pre.full")).to_contain_text("THE END")
    bob.goto(f"{live.url}/ui/chats/{chat.id}/interrupts/{review.ref}")
    request = bob.locator(f'[data-request="{review.ref}"] details.clip')
    request.locator("summary").focus()
    bob.keyboard.press("Enter")  # by keyboard too
    expect(request.locator("pre.full")).to_contain_text("THE END")


def test_the_count_agrees_with_the_filter_and_the_filter_clears(
    signed_in: Browse, api: Api, live: Live
) -> None:
    api("alice").chat("opsAgent").send("deploy api")
    api("alice").chat("formsAgent").send("a short one")
    bob = signed_in("bob")
    expect(bob.locator("#inbox-count")).to_have_text("2 pending")
    expect(bob.locator("#clear-filters")).to_have_count(0)
    bob.get_by_label("Tool").fill("deploy")
    bob.get_by_role("button", name="Filter").click()
    expect(bob.locator("#inbox-count")).to_have_text("1 of 2 pending match")
    expect(bob.locator("#inbox-rows tr")).to_have_count(1)
    bob.get_by_label("Tool").fill("nothing-like-it")
    bob.get_by_role("button", name="Filter").click()
    expect(bob.locator("#inbox-count")).to_have_text("0 of 2 pending match")
    expect(bob.locator("#inbox-rows")).to_contain_text(
        "Nothing pending matches these filters (2 pending in all).")
    bob.locator("#clear-filters").click()
    expect(bob.locator("#inbox-count")).to_have_text("2 pending")
    expect(bob.get_by_label("Tool")).to_have_value("")


def test_inbox_filters_match_the_way_people_type(
    signed_in: Browse, api: Api, live: Live
) -> None:
    api("alice").chat("opsAgent").send("deploy api")
    api("alice").chat("formsAgent").send("a short one")
    bob = signed_in("bob")
    for typed in ("Deploy", "PLO", "ops"):  # any case, any part; agent or tool
        field = "Agent" if typed == "ops" else "Tool"
        bob.goto(f"{live.url}/ui/inbox")
        bob.get_by_label(field).fill(typed)
        bob.get_by_role("button", name="Filter").click()
        expect(bob.locator("#inbox-count")).to_have_text("1 of 2 pending match")
    bob.goto(f"{live.url}/ui/inbox")
    bob.get_by_label("Tool").fill("%")  # a wildcard is a character like any other
    bob.get_by_role("button", name="Filter").click()
    expect(bob.locator("#inbox-count")).to_have_text("0 of 2 pending match")
