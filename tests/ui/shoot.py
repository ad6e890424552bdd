"""Screenshots for the README: `.venv/bin/python -m tests.ui.shoot` writes docs/ui/*.png."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import psycopg
from playwright.sync_api import Page, expect, sync_playwright

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
        held = _held_payments(live.url, alice)
        edited = _edited_payment(live.url, alice)
        with sync_playwright() as p, tempfile.TemporaryDirectory():
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            sign_in(page, live.url, "key-tom")
            page.wait_for_url("**/ui/inbox")
            # the inbox view catches up with tina's vote; the open page polls until it shows
            expect(page.locator(f'tr[data-chat="{held[0]}"] .tally')).to_have_text(
                "1 of 2 approvals", timeout=10_000)
            page.screenshot(path=OUT / "inbox.png", full_page=True)
            page.goto(f"{live.url}/ui/chats/{held[0]}/interrupts/{held[1]}")
            page.screenshot(path=OUT / "interrupt.png", full_page=True)
            page.goto(f"{live.url}/ui/chats/{edited[0]}/interrupts/{edited[1]}")
            expect(page.locator("#edits")).to_be_visible()
            page.screenshot(path=OUT / "edit.png", full_page=True)
            page.goto(f"{live.url}/ui/chats/{held[0]}/interrupts/{held[1]}")
            page.get_by_role("button", name="Approve").click()
            expect(page.locator("#outcome")).to_be_visible()
            page.screenshot(path=OUT / "outcome.png", full_page=True)
            reviewer = browser.new_page(viewport={"width": 1200, "height": 800})
            sign_in(reviewer, live.url, "key-carol")  # an auditor reads the log
            reviewer.wait_for_url("**/ui/inbox")
            reviewer.goto(f"{live.url}/ui/decisions")
            reviewer.screenshot(path=OUT / "decisions.png", full_page=True)
            reviewer.goto(f"{live.url}/ui/decisions/stats")
            reviewer.screenshot(path=OUT / "oversight.png", full_page=True)
            _review(reviewer, live.url)
            page.set_viewport_size({"width": 390, "height": 800})
            page.goto(f"{live.url}/ui/inbox")
            page.screenshot(path=OUT / "inbox-phone.png", full_page=True)
            browser.close()
    finally:
        live.close()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _review(page: Page, url: str) -> None:
    """A review of the log opened from a query, one item assessed as a finding."""
    page.goto(f"{url}/ui/reviews/queries?query=custom&filter=kind+!%3D+%22expire%22")
    page.get_by_label("Sample size").fill("3")
    page.get_by_label("Seed").fill("q4-2026")
    page.get_by_role("button", name="Open the review").click()
    item = page.locator("#item-1")
    item.get_by_label("Finding", exact=True).check()
    item.get_by_label("Severity of a finding").select_option("medium")
    item.get_by_label("Note").fill("approved in under a minute without the invoice")
    item.get_by_role("button", name="Assess item 1").click()
    page.screenshot(path=OUT / "review.png", full_page=True)


def _held_payments(url: str, alice: Client) -> tuple[str, str]:
    """Three held payments: one rejected, one with a vote (the one shown), one untouched."""
    tina, tom = Client(url, api_key="key-tina"), Client(url, api_key="key-tom")
    shown: tuple[str, str] | None = None
    for amount, to, vote in ((900, "globex", "reject"), (2500, "acme", "approve"),
                             (400, "initech", None)):
        chat = alice.chat("payAgent")
        [call] = chat.send(f"pay {amount} {to}").interrupts
        if vote == "reject":
            tom.request("POST", f"/v1/chats/{chat.id}/resume", json={"reject": [
                {"ref": call.ref, "name": "pay", "reason": "not on the vendor list"}]})
        elif vote == "approve":
            tina.request("POST", f"/v1/chats/{chat.id}/resume", json={"approve": [
                {"ref": call.ref, "name": "pay"}]})
            shown = (chat.id, call.ref)
    assert shown is not None
    return shown


def _edited_payment(url: str, alice: Client) -> tuple[str, str]:
    """A held payment whose amount tina changed, with her reason."""
    tina = Client(url, api_key="key-tina")
    chat = alice.chat("payAgent")
    [call] = chat.send("pay 1200 umbrella").interrupts
    tina.request("POST", f"/v1/chats/{chat.id}/resume", json={"edit": [
        {"ref": call.ref, "name": "pay", "input": {"amount": 950, "to": "umbrella"},
         "reason": "the invoice says 950, not 1200"}]})
    return chat.id, call.ref


if __name__ == "__main__":
    main()
