"""Every decision ends on a page that says what happened and what the agent did next.

Respond, approve and reject are covered where they are made (test_forms, test_approvals);
here: a restart with a changed input, and a withdrawal and an expiry made elsewhere, read
later by someone who did not make them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from uuid import UUID

from playwright.sync_api import expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse

Api = Callable[[str], Client]


def test_a_restart_says_the_tool_ran_with_the_new_input_and_the_agents_reply(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat = api("alice").chat("bankingAgent")
    [ask] = chat.send("Transfer $1500 to savings.").interrupts
    [limit] = api("bob").open_chat(chat.id).resume(
        respond=[ask.respond({"approved": True})]).interrupts
    page = signed_in("bob")
    page.goto(f"{live.url}/ui/chats/{chat.id}/interrupts/{limit.ref}")
    page.locator("#restart-amount").fill("900")
    page.get_by_role("button", name="Run with this input").click()
    outcome = page.locator("#outcome")
    expect(outcome).to_be_focused()
    expect(page.locator("#outcome-happened")).to_contain_text(
        'Run again by bob at ')
    expect(page.locator("#outcome-happened")).to_contain_text(
        'with a changed input {"amount": 900.0, "to_account": "savings"}')
    expect(page.locator("#outcome-then")).to_have_text(
        re.compile(r'^The tool ran and returned \{"status": "done", "balance": [0-9.]+\}\.$'))
    expect(page.locator("#outcome-reply")).to_contain_text("Done. Your checking balance is now")


def _held_pay(api: Api, amount: int) -> tuple[Client, str, str]:
    chat = api("alice").chat("payAgent")
    [held] = chat.send(f"pay {amount} bob").interrupts
    return chat, chat.id, held.ref


def test_a_withdrawal_made_elsewhere_reads_as_one_to_a_later_viewer(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat, chat_id, ref = _held_pay(api, 300)
    chat.withdraw([ref], "wrong payee")
    tina = signed_in("tina")
    tina.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    expect(tina.locator("#outcome-happened")).to_contain_text("Withdrawn by alice at ")
    expect(tina.locator("#outcome-happened")).to_contain_text("“wrong payee”")
    expect(tina.locator("#outcome-then")).to_have_text(
        "The tool did not run; the agent was told no, and why.")
    expect(tina.locator("#outcome-reply")).to_contain_text("'withdrawn': True")
    expect(tina.locator("#outcome")).not_to_be_focused()  # she did not just decide it
    expect(tina.get_by_role("button", name="Approve")).to_have_count(0)


def test_an_expiry_says_it_failed_closed(signed_in: Browse, api: Api, live: Live) -> None:
    _, chat_id, ref = _held_pay(api, 250)
    later = datetime.now(UTC) + timedelta(hours=2)  # past its one-hour deadline
    expire = live.service.expire_due(UUID(chat_id), ref, at=later)  # the sweeper's command
    with ThreadPoolExecutor(1) as pool:  # its own loop: not on Playwright's thread
        assert pool.submit(asyncio.run, expire).result() == "expired"
    tom = signed_in("tom")
    tom.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    expect(tom.locator("#outcome-happened")).to_contain_text(
        "with no decision: it failed closed.")
    expect(tom.locator("#outcome-then")).to_have_text(
        "The tool did not run; the agent was told no, and why.")
    expect(tom.locator("#outcome-reply")).to_contain_text("'expired': True")
