"""A live server on PostgreSQL and Debian's Chromium driven by Playwright (no downloads)."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Dialog, Page, sync_playwright

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.client import Client
from interlock.projections import open_read_models
from interlock.stores.console_sessions import open_sessions
from tests.api.conftest import KEYS, Live
from tests.api.server import ThreadServer
from tests.ui.agents import AGENTS

CHROMIUM = Path("/usr/bin/chromium")
HERE = Path(__file__).parent
UI_STORE = os.environ.get("INTERLOCK_UI_STORE", "pg_store")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The console's live server is on PostgreSQL unless INTERLOCK_UI_STORE names another."""
    if UI_STORE != "pg_store":
        return
    for item in items:
        if item.path.is_relative_to(HERE) and "live" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="package")  # closed before other packages run: it holds a loop
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get install -y chromium (see .ci/run)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                              args=["--no-sandbox"])
        yield b
        b.close()


class ConsoleLive(Live):
    """The API tests' live server, with the console's own agents (formsAgent) added."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.service = build_service(store, AGENTS)
        self.views = open_read_models(self.service)
        self.server = ThreadServer(make_app(self.service, self.views,
                                            AuthConfig.from_mapping(KEYS),
                                            sessions=open_sessions(self.service)))
        self.url = self.server.url


@pytest.fixture
def live(request: pytest.FixtureRequest) -> Iterator[ConsoleLive]:
    store = request.getfixturevalue(UI_STORE)
    server = ConsoleLive(store)
    try:
        yield server
    finally:
        server.close()


Browse = Callable[[str], Page]


@pytest.fixture
def signed_in(browser: Browser, live: Live) -> Iterator[Browse]:
    """`signed_in("bob")`: a page of a fresh browser context, signed in with bob's key."""
    contexts: list[BrowserContext] = []

    def open_as(name: str) -> Page:
        context = browser.new_context(accept_downloads=True)
        contexts.append(context)
        page = context.new_page()
        sign_in(page, live.url, f"key-{name}")
        page.wait_for_url("**/ui/inbox**")
        return page

    yield open_as
    for c in contexts:
        c.close()


_ACCEPTING: weakref.WeakSet[Page] = weakref.WeakSet()


def accept_dialogs(dialog: Dialog) -> None:
    """The console confirms a settling vote and a fork: tests that are not about that say
    yes (a test about it removes this listener and answers itself)."""
    dialog.accept()


def sign_in(page: Page, url: str, key: str) -> None:
    if page not in _ACCEPTING:  # signed in again on the same page: one listener is enough
        _ACCEPTING.add(page)
        page.on("dialog", accept_dialogs)
    page.goto(f"{url}/ui/inbox")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()


@pytest.fixture
def api(live: Live) -> Iterator[Callable[[str], Client]]:
    """`api("alice")`: the HTTP client with that principal's key (to act from elsewhere)."""
    clients: list[Client] = []

    def make(name: str) -> Client:
        clients.append(Client(live.url, api_key=f"key-{name}"))
        return clients[-1]

    yield make
    for c in clients:
        c.close()
