"""The console in a real Chromium: sign-in, inbox, deciding, four-eyes, validation, export."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Browser, expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse, sign_in

Api = Callable[[str], Client]


def _deploy(api: Api, who: str, service: str) -> tuple[str, str]:
    """`who` asks opsAgent to deploy; the chat id and the pending interrupt's ref."""
    chat = api(who).chat("opsAgent")
    [pending] = chat.send(f"deploy {service}").interrupts
    return chat.id, pending.ref


def _events(api: Api, chat_id: str) -> list[str]:
    return [e["type"] for e in api("root").open_chat(chat_id).events()]


def test_sign_in_refuses_a_wrong_key_then_signs_in_and_out(browser: Browser, live: Live) -> None:
    context = browser.new_context()
    page = context.new_page()
    sign_in(page, live.url, "key-nobody")
    expect(page.get_by_role("alert")).to_contain_text("not valid")
    sign_in(page, live.url, "key-bob")
    expect(page).to_have_url(re.compile(r"/ui/inbox$"))
    expect(page.locator(".who")).to_contain_text("bob")
    [session] = [c for c in context.cookies() if c["name"] == "interlock_session"]
    assert (session["httpOnly"], session["sameSite"], session["secure"]) == (True, "Strict", False)
    assert "key-bob" not in session["value"]
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/ui/sign-in$"))
    page.goto(f"{live.url}/ui/inbox")
    expect(page).to_have_url(re.compile(r"/ui/sign-in\?next="))
    context.close()


def test_a_new_interrupt_appears_in_an_open_inbox_without_reload(
    signed_in: Browse, api: Api
) -> None:
    page = signed_in("bob")
    expect(page).to_have_title(re.compile(r"^\(0\) Inbox"))
    page.evaluate("window.sameDocument = true")
    _, ref = _deploy(api, "alice", "api")
    row = page.locator(f'#inbox-rows tr[data-ref="{ref}"]')
    expect(row).to_contain_text("deploy", timeout=10_000)
    expect(row).to_contain_text("alice")
    expect(page).to_have_title(re.compile(r"^\(1\) Inbox"))
    assert page.evaluate("window.sameDocument") is True  # no reload happened


def test_approving_shows_the_agents_answer_in_the_chat(signed_in: Browse, api: Api) -> None:
    chat_id, ref = _deploy(api, "alice", "web")
    page = signed_in("bob")
    page.get_by_role("link", name="deploy").click()
    expect(page.locator(".description")).to_have_text(
        "Deploy a service; a second person must approve.")
    expect(page.locator("#input-json")).to_contain_text('"service": "web"')
    expect(page.locator("#input-sha")).to_have_attribute("title", re.compile(r"^[0-9a-f]{64}$"))
    expect(page.locator("#why-not")).to_have_count(0)
    page.locator("#respond-status").fill("web deployed by hand")
    page.get_by_role("button", name="Respond with this answer").click()
    expect(page).to_have_url(re.compile(rf"/ui/chats/{chat_id}"))
    expect(page.locator(".msg.tool")).to_contain_text("web deployed by hand")
    expect(page.locator(".msg.model").last).to_contain_text("ops done")
    assert "Responded" in _events(api, chat_id)
    page.goto(page.url.split("/ui/")[0] + "/ui/inbox")
    expect(page.locator(f'tr[data-ref="{ref}"]')).to_have_count(0)


def test_the_requester_is_refused_by_four_eyes_with_the_reason(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _deploy(api, "dana", "db")
    page = signed_in("dana")  # dana may approve, but she sent this turn
    page.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    expect(page.locator("#why-not")).to_contain_text("Four-eyes")
    expect(page.locator("#why-not")).to_contain_text("that was you (dana)")
    expect(page.get_by_role("button", name="Respond with this answer")).to_be_disabled()
    # Even a form forced open is refused by the server, with its reason.
    page.evaluate("document.querySelectorAll('[disabled]').forEach(e => {"
                  "e.disabled = false; e.removeAttribute('aria-disabled'); })")
    page.locator("#respond-status").fill("db deployed")
    page.get_by_role("button", name="Respond with this answer").click()
    expect(page.locator("#notice")).to_contain_text(
        "deploy needs an approver other than dana, who sent the turn")
    expect(page.locator("#status")).to_have_text("pending")
    assert "Responded" not in _events(api, chat_id)


def test_an_edited_input_is_validated_in_the_browser_and_by_the_server(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat = api("alice").chat("bankingAgent")
    [approval] = chat.send("Transfer $1500 to savings.").interrupts
    [limit] = api("bob").open_chat(chat.id).resume(
        respond=[approval.respond({"approved": True})]).interrupts
    page = signed_in("bob")
    url = f"{live.url}/ui/chats/{chat.id}/interrupts/{limit.ref}"
    page.goto(url)
    expect(page.locator("#restart-amount")).to_have_value("1500.0")
    page.locator("#restart-to_account").fill("")
    page.get_by_role("button", name="Run with this input").click()
    expect(page.locator('.field-error[data-for="restart-to_account"]')).not_to_be_empty()
    assert page.url == url  # the browser did not submit
    page.locator("#restart-to_account").fill("savings")
    page.locator("#restart-amount").fill("-5")  # the server's schema says amount > 0
    page.get_by_role("button", name="Run with this input").click()
    expect(page.locator("#restart-errors li")).to_contain_text(
        "amount: Input should be greater than 0")
    expect(page.locator("#restart-amount")).to_have_value("-5")
    assert "Restarted" not in _events(api, chat.id)
    page.locator("#restart-amount").fill("900")
    page.get_by_role("button", name="Run with this input").click()
    expect(page).to_have_url(re.compile(rf"/ui/chats/{chat.id}"))
    restarted = [e for e in api("root").open_chat(chat.id).events() if e["type"] == "Restarted"]
    assert restarted[0]["data"]["replace_input"] == {"amount": 900.0, "to_account": "savings"}
    assert restarted[0]["actor"] == "bob"


def test_a_decision_made_elsewhere_meanwhile_is_a_clear_message(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _deploy(api, "alice", "cache")
    page = signed_in("bob")
    page.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    api("root").request("POST", f"/v1/chats/{chat_id}/resume", json={
        "respond": [{"ref": ref, "name": "deploy", "output": {"status": "done by root"}}]})
    page.locator("#respond-status").fill("too late")
    page.get_by_role("button", name="Respond with this answer").click()
    expect(page.locator("#notice")).to_contain_text(
        "Someone decided this meanwhile: respond by root")
    expect(page.locator("#decided")).to_contain_text("respond by root")


def test_the_decision_log_filters_counts_and_downloads(
    signed_in: Browse, api: Api, live: Live, tmp_path: Path
) -> None:
    chat_id, ref = _deploy(api, "alice", "search")
    api("bob").request("POST", f"/v1/chats/{chat_id}/resume", json={
        "respond": [{"ref": ref, "name": "deploy", "output": {"status": "ok"}}]})
    page = signed_in("carol")  # an auditor reads the log
    page.get_by_role("link", name="Decisions").click()
    expect(page.locator("#decisions tbody tr")).to_have_count(1)
    expect(page.locator("#decisions tbody")).to_contain_text("bob")
    page.get_by_label("Actor").fill("nobody")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#decisions tbody")).to_contain_text("No decision matches")
    page.get_by_label("Actor").fill("bob")
    page.get_by_label("Kind").select_option("respond")
    page.get_by_role("button", name="Filter").click()
    with page.expect_download() as info:
        page.locator("#export-csv").click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    lines = target.read_text().splitlines()
    assert target.suffix == ".csv" and lines[0].startswith("chat_id,tenant,agent,ref,tool,kind")
    assert len(lines) == 2 and ",bob," in lines[1] and chat_id in lines[1]
    page.get_by_role("link", name="Statistics").click()
    expect(page.locator("#total")).to_have_text("1")


def test_a_post_without_the_csrf_token_is_refused(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _deploy(api, "alice", "queue")
    page = signed_in("bob")
    url = f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}/respond"
    for form in ({"status": "forged"}, {"status": "forged", "csrf": "not-the-token"}):
        answer = page.request.post(url, form=form)
        assert answer.status == 403
        assert "CSRF" in answer.text()
    assert "Responded" not in _events(api, chat_id)


def test_another_tenants_interrupt_is_invisible(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _deploy(api, "alice", "billing")
    page = signed_in("eve")
    expect(page.locator("#inbox-rows")).to_contain_text("Nothing is waiting")
    expect(page).to_have_title(re.compile(r"^\(0\) Inbox"))
    answer = page.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    assert answer is not None and answer.status == 404
    expect(page.get_by_role("alert")).to_contain_text("not found")
    expect(page.locator("body")).not_to_contain_text("billing")


def test_a_chat_shows_its_timeline_any_version_and_its_chain(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, _ = _deploy(api, "alice", "mail")
    page = signed_in("bob")
    page.goto(f"{live.url}/ui/chats/{chat_id}")
    expect(page.locator("#chain")).to_contain_text("verifies")
    timeline = page.locator("#timeline li")
    expect(timeline.first).to_contain_text("Chat started")
    expect(timeline.first).to_contain_text("alice")
    expect(page.locator("#chat-status")).to_have_text("interrupted")
    page.get_by_label("State at version").fill("2")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#chat-status")).to_contain_text("as of version 2")
    expect(page.locator(".msg.user")).to_contain_text("deploy mail")
    expect(page.locator(".msg.model")).to_have_count(0)


def test_fork_from_here_makes_a_chat_with_the_history_up_to_the_version_shown(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, _ = _deploy(api, "alice", "mail")
    page = signed_in("alice")
    page.goto(f"{live.url}/ui/chats/{chat_id}")
    page.get_by_role("button", name="Fork from here").click()
    page.wait_for_url(re.compile(r".*/ui/chats/(?!" + chat_id + r")[0-9a-f-]{36}$"))
    fork_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#chat-status")).to_have_text("interrupted")
    expect(page.locator(".notice.warn")).to_contain_text("deploy")  # what waited, waits here
    expect(page.locator("#timeline li").last).to_contain_text("Forked from another chat")
    assert api("carol").open_chat(fork_id).state()["interrupts"][0]["name"] == "deploy"
    viewer = signed_in("bob")  # an approver may look, not fork
    viewer.goto(f"{live.url}/ui/chats/{chat_id}")
    expect(viewer.get_by_role("button", name="Fork from here")).to_have_count(0)
