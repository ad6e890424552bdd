"""Times in the viewer's zone, named, UTC on hover; the log's date filters read that zone."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, Page, expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import sign_in

Api = Callable[[str], Client]
TOKYO = "Asia/Tokyo"


@pytest.fixture
def tokyo(browser: Browser, live: Live) -> Iterator[Page]:
    """Carol, an auditor, in a browser set to Tokyo's time (UTC+9)."""
    context = browser.new_context(timezone_id=TOKYO, locale="en-US")
    page = context.new_page()
    sign_in(page, live.url, "key-carol")
    page.wait_for_url("**/ui/inbox**")
    yield page
    context.close()


def _decided(api: Api) -> str:
    chat = api("alice").chat("opsAgent")
    [pending] = chat.send("deploy api").interrupts
    api("bob").request("POST", f"/v1/chats/{chat.id}/resume", json={
        "respond": [{"ref": pending.ref, "name": "deploy", "output": {"status": "ok"}}]})
    return chat.id


def test_times_show_in_the_viewers_zone_with_utc_on_hover(
    tokyo: Page, api: Api, live: Live
) -> None:
    _decided(api)
    tokyo.goto(f"{live.url}/ui/decisions")
    when = tokyo.locator("#decisions tbody time").first
    expect(when).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d GMT\+9$"))
    expect(when).to_have_attribute("title", re.compile(r" UTC$"))
    utc = datetime.fromisoformat(str(when.get_attribute("datetime")))
    local = utc.astimezone(ZoneInfo(TOKYO)).strftime("%Y-%m-%d %H:%M:%S")
    expect(when).to_have_text(f"{local} GMT+9")


def test_the_logs_date_filters_read_the_browsers_zone(
    tokyo: Page, api: Api, live: Live
) -> None:
    _decided(api)
    now_there = datetime.now(ZoneInfo(TOKYO)).replace(tzinfo=None)
    before = (now_there - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S")  # Tokyo time
    tokyo.goto(f"{live.url}/ui/decisions")
    expect(tokyo.get_by_label("From")).to_be_visible()
    expect(tokyo.locator(".filters")).to_contain_text(f"times in {TOKYO}")
    tokyo.get_by_label("From").fill(before)
    tokyo.get_by_role("button", name="Filter").click()
    expect(tokyo.locator("#decisions tbody tr")).to_have_count(1)
    expect(tokyo.locator("#decisions tbody")).not_to_contain_text("No decision matches")
    tokyo.get_by_label("From").fill("")
    tokyo.get_by_label("Until").fill(before)
    tokyo.get_by_role("button", name="Filter").click()
    expect(tokyo.locator("#decisions tbody")).to_contain_text("No decision matches")


def test_an_unknown_zone_is_a_clear_4xx(tokyo: Page, live: Live) -> None:
    answer = tokyo.goto(f"{live.url}/ui/decisions?since=2026-01-01T00:00&tz=Mars/Olympus")
    assert answer is not None and answer.status == 422
    expect(tokyo.get_by_role("alert")).to_contain_text("tz is not a time zone")
