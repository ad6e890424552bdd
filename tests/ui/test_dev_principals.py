"""Dev mode with named principals (`interlock serve --dev-principals alice,tina:treasury`):
a newcomer tries a policy from the API and a picker in the console, loopback only."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from interlock.api.app import make_app
from interlock.api.dev_principals import dev_auth, parse_dev_principals
from interlock.bootstrap import auth_from, build_service
from interlock.cli.serve import register
from interlock.client import Client
from interlock.domain.errors import ConfigurationError, ForbiddenError
from interlock.projections import open_read_models
from interlock.settings import load_settings
from tests.api.server import ThreadServer
from tests.ui.agents import AGENTS
from tests.ui.conftest import accept_dialogs
from tests.ui.test_a11y import BLOCKING, _violations

NAMES = "alice,tina:treasury,tom:treasury"


@pytest.fixture
def dev_server(sqlite_store: str) -> Iterator[str]:
    service = build_service(sqlite_store, AGENTS)
    views = open_read_models(service)
    server = ThreadServer(make_app(service, views, dev_auth(NAMES)))
    try:
        yield server.url
    finally:
        server.stop()
        views.close()


def test_a_newcomer_acts_as_named_principals_from_the_api_and_the_console(
    browser: Browser, dev_server: str
) -> None:
    alice = Client(dev_server, api_key="alice")  # in dev mode the key is just the name
    try:
        chat = alice.chat("payAgent")
        [held] = chat.send("pay 500 bob").interrupts
    finally:
        alice.close()
    page = browser.new_context().new_page()
    page.on("dialog", accept_dialogs)  # tom's vote settles it: the console asks first
    page.goto(f"{dev_server}/ui/chats/{chat.id}/interrupts/{held.ref}")
    expect(page.locator(".who")).to_contain_text("dev")
    assert [v for v in _violations(page) if v.split()[0] in BLOCKING] == []  # the picker too
    expect(page.locator("#policy-requester")).to_contain_text("alice")
    page.get_by_label("Act as").select_option("tina")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator(".who")).to_contain_text("tina")
    expect(page).to_have_url(re.compile(rf"/interrupts/{held.ref}$"))
    page.get_by_role("button", name="Approve").click()
    expect(page.locator("#notice")).to_contain_text("Your approval is recorded")
    page.get_by_label("Act as").select_option("tom")
    page.get_by_role("button", name="Switch").click()
    page.get_by_role("button", name="Approve").click()
    expect(page.locator("#outcome-happened")).to_contain_text("the quorum was met (tina, tom)")
    page.context.close()


def test_names_roles_and_refusals() -> None:
    found = parse_dev_principals("alice, tina:treasury:approver ,tom:treasury")
    assert [(p.id, sorted(p.roles)) for p in found] == [
        ("alice", ["approver", "auditor", "requester"]),
        ("tina", ["approver", "treasury"]), ("tom", ["treasury"])]
    for bad, says in (("", "no names"), ("al ice", "principal id"), ("tina:", "role"),
                      ("tom,tom", "twice"), ("dev", "reserved")):
        with pytest.raises(ConfigurationError, match=says):
            parse_dev_principals(bad)
    auth = dev_auth(NAMES)
    assert auth.authenticate("Bearer tina", "127.0.0.1").id == "tina"
    assert auth.authenticate(None, "127.0.0.1").id == "dev"
    with pytest.raises(ForbiddenError, match="loopback"):
        auth.authenticate("Bearer tina", "10.0.0.7")


def test_the_serve_flag_reaches_the_auth_and_refuses_keys(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--dev-principals", NAMES])
    assert args.dev_principals == NAMES
    auth = auth_from(load_settings(dev_principals=NAMES))
    assert auth.dev_mode and sorted(auth.dev) == ["alice", "tina", "tom"]
    keys = tmp_path / "keys.json"
    keys.write_text('{"key-a": {"id": "a", "roles": ["approver"]}}')
    keys.chmod(0o600)
    with pytest.raises(ConfigurationError, match="for dev mode: this server has API keys"):
        auth_from(load_settings(dev_principals=NAMES, api_keys_file=keys))
