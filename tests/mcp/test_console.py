"""A held MCP call approved in the console, in Debian's Chromium: the server is called once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from interlock import Agent
from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.client import Client
from interlock.mcp import mcp_tools
from interlock.projections import open_read_models
from tests.api.server import ThreadServer
from tests.kit import FunctionModel, Script, call, say
from tests.mcp.conftest import CONFIG, Ledger
from tests.mcp.test_http_api import KEYS

CHROMIUM = Path("/usr/bin/chromium")  # Debian's, as the console's own tests drive it


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get install -y chromium (see .ci/run)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                              args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def console(spec: str, sqlite_store: str) -> Iterator[str]:
    script = Script([call(("refund", {"invoice": "INV-3", "amount": 15}, "r1")),
                     say("refunded")])
    agent = Agent(name="billing", system="You refund invoices.",
                  tools=mcp_tools(spec, config=CONFIG), model=FunctionModel(script))
    service = build_service(sqlite_store, [agent])
    views = open_read_models(service)
    server = ThreadServer(make_app(service, views, AuthConfig.from_mapping(KEYS)))
    try:
        yield server.url
    finally:
        server.stop()
        views.close()


def test_an_approver_approves_an_mcp_call_in_the_console_and_it_runs_once(
    browser: Browser, console: str, ledger: Ledger
) -> None:
    with Client(console, api_key="key-alice") as alice:
        chat = alice.chat("billing")
        [held] = chat.send("refund INV-3").interrupts
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{console}/ui/inbox")
        page.get_by_label("API key").fill("key-bob")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/ui/inbox**")
        row = page.locator(f'#inbox-rows tr[data-ref="{held.ref}"]')
        row.get_by_role("link", name="refund").click()
        expect(page.locator("#policy-deciders")).to_contain_text("approver")
        assert ledger.calls() == []
        asked: list[str] = []  # the settling vote asks to confirm: accepted here
        page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        page.get_by_role("button", name="Approve").click()
        expect(page.locator("#status")).to_have_text("completed")
        assert len(asked) == 1
    finally:
        context.close()
    with Client(console, api_key="key-carol") as carol:
        assert carol.open_chat(chat.id).state()["status"] == "idle"
        [row] = carol.decisions(chat_id=chat.id)["items"]
    assert row["actor"] == "bob" and row["kind"] == "approve"
    assert [(c["tool"], c["key"]) for c in ledger.calls()] == [("refund", f"{chat.id}:r1:1")]
