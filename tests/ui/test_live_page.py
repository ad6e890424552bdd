"""The interrupt page hears of a decision made elsewhere; old versions do not link to live
actions; a chat whose stored log was changed shows where its chain breaks."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from playwright.sync_api import expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.projections.tamper import EventsTable
from tests.ui.conftest import Browse, ConsoleLive

Api = Callable[[str], Client]


def test_an_open_page_hears_of_a_decision_made_elsewhere_without_a_reload(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat = api("alice").chat("opsAgent")
    [pending] = chat.send("deploy api").interrupts
    bob = signed_in("bob")
    bob.goto(f"{live.url}/ui/chats/{chat.id}/interrupts/{pending.ref}")
    bob.evaluate("window.sameDocument = true")
    api("root").request("POST", f"/v1/chats/{chat.id}/resume", json={
        "respond": [{"ref": pending.ref, "name": "deploy", "output": {"status": "by hand"}}]})
    notice = bob.locator("#live-notice")
    expect(notice).to_contain_text("Decided elsewhere: respond by root", timeout=10_000)
    expect(bob.get_by_role("button", name="Respond with this answer")).to_be_disabled()
    expect(notice.get_by_role("link", name="Show what happened")).to_be_visible()
    assert bob.evaluate("window.sameDocument") is True


def test_an_open_vote_page_hears_of_a_withdrawal(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat = api("alice").chat("payAgent")
    [held] = chat.send("pay 500 bob").interrupts
    tina = signed_in("tina")
    tina.goto(f"{live.url}/ui/chats/{chat.id}/interrupts/{held.ref}")
    chat.withdraw([held.ref], "wrong payee")
    expect(tina.locator("#live-notice")).to_contain_text(
        "Decided elsewhere: withdraw by alice", timeout=10_000)
    expect(tina.get_by_role("button", name="Approve")).to_be_disabled()
    tina.locator("#live-notice").get_by_role("link", name="Show what happened").click()
    expect(tina.locator("#outcome-happened")).to_contain_text("Withdrawn by alice")


def test_an_old_version_does_not_link_to_a_call_decided_since(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat = api("alice").chat("opsAgent")
    [pending] = chat.send("deploy web").interrupts
    waiting_at = len(list(api("root").open_chat(chat.id).events()))
    api("bob").request("POST", f"/v1/chats/{chat.id}/resume", json={
        "respond": [{"ref": pending.ref, "name": "deploy", "output": {"status": "ok"}}]})
    bob = signed_in("bob")
    bob.goto(f"{live.url}/ui/chats/{chat.id}?version={waiting_at}")
    expect(bob.locator("#waiting")).to_contain_text(f"At version {waiting_at}, deploy was waiting")
    expect(bob.locator("#waiting a[href*='/interrupts/']")).to_have_count(0)
    bob.goto(f"{live.url}/ui/chats/{chat.id}")
    expect(bob.locator("#waiting")).to_have_count(0)


def test_a_changed_log_is_marked_on_the_timeline_where_the_chain_breaks(
    signed_in: Browse, api: Api, live: ConsoleLive
) -> None:
    chat = api("alice").chat("opsAgent")
    chat.send("deploy mail")
    table = EventsTable(live.store, UUID(chat.id))
    _, state = table.records()[2]
    table.write_raw(2, state.replace(b'":', b'": '))  # the same JSON in other bytes
    bob = signed_in("bob")
    bob.goto(f"{live.url}/ui/chats/{chat.id}")
    expect(bob.locator("#chain")).to_contain_text("broken")
    brk = bob.locator("#chain-break")
    expect(brk).to_contain_text("v2")
    expect(brk).to_contain_text("The chain breaks here")
    expect(bob.locator("#timeline > li")).to_have_count(2)  # v1, then the break
    expect(bob.locator("#timeline > li").first).to_contain_text("Chat started")
