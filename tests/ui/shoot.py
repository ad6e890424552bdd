"""Screenshots for the README: `.venv/bin/python -m tests.ui.shoot` writes docs/ui/*.png."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import psycopg
from playwright.sync_api import sync_playwright

from interlock.client import Client
from tests.api.conftest import Live
from tests.conftest import PG_URL, pg_schema_url
from tests.ui.conftest import CHROMIUM, sign_in

OUT = Path(__file__).resolve().parents[2] / "docs" / "ui"


def main() -> None:
    schema = f"shots_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    live = Live(pg_schema_url(schema))
    try:
        alice, bob = Client(live.url, api_key="key-alice"), Client(live.url, api_key="key-bob")
        for text in ("Transfer $1500 to savings.", "Transfer $200 to savings."):
            chat = alice.chat("bankingAgent")
            [ask] = chat.send(text).interrupts
            bob.open_chat(chat.id).resume(respond=[ask.respond({"approved": True})])
        for service in ("api", "web", "search"):
            alice.chat("opsAgent").send(f"deploy {service}")
        with sync_playwright() as p, tempfile.TemporaryDirectory():
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            sign_in(page, live.url, "key-bob")
            page.wait_for_url("**/ui/inbox")
            page.screenshot(path=OUT / "inbox.png", full_page=True)
            page.locator("#inbox-rows a").first.click()
            page.screenshot(path=OUT / "interrupt.png", full_page=True)
            page.goto(f"{live.url}/ui/decisions")
            page.screenshot(path=OUT / "decisions.png", full_page=True)
            page.set_viewport_size({"width": 390, "height": 800})
            page.goto(f"{live.url}/ui/inbox")
            page.screenshot(path=OUT / "inbox-phone.png", full_page=True)
            browser.close()
    finally:
        live.close()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
