"""Forms drawn from a tool's schema, in a real Chromium: every shape, with and without JS.

formsAgent's `review` answers with a Review (tests/ui/agents.py): an enum, an optional and
length-limited note, a bounded number with a default, a date, a tri-state and a plain
boolean, a nested address with a pattern, arrays of objects and of strings, and one
free-form object, the only value typed as JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from playwright.sync_api import Browser, Page, expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse, sign_in

Api = Callable[[str], Client]


def _review(api: Api, subject: str = "the Q3 budget") -> tuple[str, str]:
    chat = api("alice").chat("formsAgent")
    [pending] = chat.send(subject).interrupts
    return chat.id, pending.ref


def _responded(api: Api, chat_id: str) -> list[dict[str, Any]]:
    events = api("root").open_chat(chat_id).events()
    return [e["data"]["output"] for e in events if e["type"] == "Responded"]


def _fill_required(page: Page) -> None:
    page.get_by_label("Level").select_option("high")
    page.get_by_label("Due").fill("2026-12-24")
    page.get_by_label("City").fill("Basel")
    page.get_by_label("Zip").fill("40510")


def test_every_schema_shape_is_a_labelled_input_with_its_constraints(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _review(api)
    page = signed_in("bob")
    page.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    form = page.locator('form[action$="/respond"]')
    expect(form.locator("textarea")).to_have_count(1)  # `extra` alone is free-form
    expect(form.get_by_label("Extra (JSON)")).to_be_visible()
    expect(form.get_by_label("Level")).to_have_attribute("required", "")
    expect(form.get_by_label("Note")).to_have_attribute("maxlength", "20")
    expect(form.get_by_label("Note")).not_to_have_attribute("required", "")
    expect(form.locator("#respond-note-hint")).to_have_text("Why, in a few words")
    score = form.get_by_label("Score")
    expect(score).to_have_value("0.5")  # its default
    expect(score).to_have_attribute("min", "0")
    expect(score).to_have_attribute("max", "1")
    expect(form.get_by_label("Due")).to_have_attribute("type", "date")
    expect(form.get_by_label("Urgent")).to_have_js_property("tagName", "SELECT")  # yes/no/unset
    expect(form.get_by_label("Notify")).to_have_attribute("type", "checkbox")
    expect(form.get_by_role("group", name="Address")).to_be_visible()
    expect(form.get_by_label("Zip")).to_have_attribute("pattern", "^[0-9]{5}$")
    _fill_required(page)
    page.get_by_label("Note").fill("looks fine")
    page.get_by_label("Urgent").select_option("no")
    page.get_by_label("Notify").check()
    lines = form.get_by_role("group", name="Lines")
    lines.get_by_role("button", name="Add to Lines").click()
    lines.get_by_role("button", name="Add to Lines").click()
    page.locator("#respond-lines-0-item").fill("desk")
    page.locator("#respond-lines-0-qty").fill("2")
    page.locator("#respond-lines-1-item").fill("chair")
    page.locator("#respond-lines-1-qty").fill("4")
    lines.get_by_role("button", name="Remove item 1 of Lines").click()
    form.get_by_role("group", name="Tags").get_by_role("button", name="Add to Tags").click()
    page.locator("#respond-tags-0").fill("office")
    page.get_by_label("Extra (JSON)").fill('{"ticket": 42}')
    page.get_by_role("button", name="Respond with this answer").click()
    expect(page.locator("#outcome")).to_be_visible()
    assert _responded(api, chat_id) == [{
        "level": "high", "note": "looks fine", "score": 0.5, "due": "2026-12-24",
        "urgent": False, "notify": True, "address": {"city": "Basel", "zip": "40510"},
        "lines": [{"item": "chair", "qty": 4}], "tags": ["office"], "extra": {"ticket": 42}}]


def test_a_value_outside_the_schema_is_refused_by_the_server_with_its_field(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _review(api)
    page = signed_in("bob")
    url = f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}"
    page.goto(url)
    _fill_required(page)
    page.get_by_label("Zip").fill("12")
    page.get_by_role("button", name="Respond with this answer").click()
    assert page.url == url  # the browser checks the pattern first
    expect(page.locator('.field-error[data-for="respond-address-zip"]')).not_to_be_empty()
    # Past the browser (its checks switched off), the server checks again and names the field.
    page.evaluate("document.querySelector('form[action$=\"/respond\"]').noValidate = true")
    page.get_by_label("Score").fill("7")
    page.get_by_role("button", name="Respond with this answer").click()
    errors = page.locator("#respond-errors li")
    expect(errors).to_contain_text(["address.zip: String should match pattern"])
    expect(errors.filter(has_text="score")).to_contain_text("less than or equal to 1")
    expect(page.get_by_label("Zip")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Zip")).to_have_value("12")  # what was typed, kept
    assert _responded(api, chat_id) == []


def test_without_javascript_the_form_still_answers_arrays_included(
    browser: Browser, api: Api, live: Live
) -> None:
    chat_id, ref = _review(api)
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    sign_in(page, live.url, "key-bob")
    page.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    _fill_required(page)
    page.locator("#respond-lines-0-item").fill("lamp")  # one blank row to fill, no JS needed
    page.locator("#respond-lines-0-qty").fill("1")
    page.get_by_role("button", name="Respond with this answer").click()
    expect(page).to_have_url(re.compile(r"/interrupts/"))
    context.close()
    [output] = _responded(api, chat_id)
    assert output["lines"] == [{"item": "lamp", "qty": 1}] and output["tags"] == []


def test_the_demos_approval_is_a_decision_with_two_buttons_and_words_after(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat = api("alice").chat("bankingAgent")
    [ask] = chat.send("Transfer $300 to savings.").interrupts
    page = signed_in("bob")
    page.goto(f"{live.url}/ui/chats/{chat.id}/interrupts/{ask.ref}")
    form = page.locator('form[action$="/respond"]')
    expect(form.locator("textarea[name=__json__]")).to_have_count(0)
    expect(form.get_by_role("button", name="Approve")).to_be_visible()
    expect(form.get_by_role("button", name="Decline")).to_be_visible()
    page.get_by_label("Feedback").fill("not this month")
    page.get_by_label("Feedback").press("Enter")  # Enter in a field decides nothing
    assert _responded(api, chat.id) == []
    form.get_by_role("button", name="Decline").click()
    expect(page.locator("#outcome")).to_contain_text("Declined by bob")
    expect(page.locator("#outcome")).to_contain_text("Transfer cancelled. not this month")
    assert _responded(api, chat.id) == [{"approved": False, "feedback": "not this month"}]
    expect(page.locator("#earlier")).to_contain_text("Declined")
    page.goto(f"{live.url}/ui/decisions")
    expect(page.locator("#decisions tbody tr").first).to_contain_text("Declined: “not this month”")
    page.goto(f"{live.url}/ui/chats/{chat.id}")
    expect(page.locator("#timeline")).to_contain_text("Declined: “not this month”")
