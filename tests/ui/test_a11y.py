"""Accessibility: axe-core (shipped by axe-playwright-python) over every console page, and a
whole approval made with the keyboard alone.

No page may have a serious or critical violation; lesser ones are printed (pytest -s).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse

Api = Callable[[str], Client]
BLOCKING = ("serious", "critical")
AXE = Axe()


def _violations(page: Page) -> list[str]:
    """`impact id: selectors` for each violation; serious and critical ones first."""
    results = AXE.run(page).response["violations"]
    found = [(v["impact"], f"{v['impact']} {v['id']}: "
              + ", ".join(str(n["target"]) for n in v["nodes"][:5])) for v in results]
    return [text for _, text in sorted(found, key=lambda f: f[0] not in BLOCKING)]


def _check(page: Page, where: str, seen: dict[str, list[str]]) -> None:
    seen[where] = _violations(page)


def test_no_console_page_has_a_serious_or_critical_violation(
    browser: Browser, signed_in: Browse, api: Api, live: Live
) -> None:
    seen: dict[str, list[str]] = {}
    anonymous = browser.new_context().new_page()
    anonymous.goto(f"{live.url}/ui/sign-in")
    _check(anonymous, "sign-in", seen)
    forms = api("alice").chat("formsAgent")
    [review] = forms.send("the budget").interrupts
    bank = api("alice").chat("bankingAgent")
    [ask] = bank.send("Transfer $300 to savings.").interrupts
    pay = api("alice").chat("payAgent")
    [held] = pay.send("pay 500 bob").interrupts
    bob, tina = signed_in("bob"), signed_in("tina")
    expect(bob.locator("#inbox-rows tr")).to_have_count(3)
    _check(bob, "inbox", seen)
    bob.goto(f"{live.url}/ui/inbox?tool=nothing-like-it")
    _check(bob, "inbox, filtered to nothing", seen)
    bob.goto(f"{live.url}/ui/chats/{forms.id}/interrupts/{review.ref}")
    bob.get_by_role("group", name="Lines").get_by_role("button", name="Add to Lines").click()
    _check(bob, "interrupt: a generated form", seen)
    bob.get_by_label("Zip").fill("1")
    bob.evaluate("document.querySelector('form[action$=\"/respond\"]').noValidate = true")
    bob.get_by_role("button", name="Respond with this answer").click()
    expect(bob.locator("#respond-errors li").first).to_be_visible()
    _check(bob, "interrupt: a refused form", seen)
    bob.goto(f"{live.url}/ui/chats/{bank.id}/interrupts/{ask.ref}")
    _check(bob, "interrupt: a decision", seen)
    bob.get_by_role("button", name="Approve").click()
    expect(bob.locator("#outcome")).to_be_visible()
    _check(bob, "interrupt: its outcome", seen)
    tina.goto(f"{live.url}/ui/chats/{pay.id}/interrupts/{held.ref}")
    _check(tina, "interrupt: a held call to vote on", seen)
    tina.get_by_role("button", name="Approve").click()
    expect(tina.locator("#notice")).to_be_visible()
    _check(tina, "interrupt: a vote recorded", seen)
    bob.goto(f"{live.url}/ui/chats/{bank.id}")
    _check(bob, "chat", seen)
    bob.goto(f"{live.url}/ui/chats/{bank.id}?version=2")
    _check(bob, "chat at a version", seen)
    bob.goto(f"{live.url}/ui/decisions")
    _check(bob, "decisions", seen)
    bob.goto(f"{live.url}/ui/decisions/stats")
    _check(bob, "decision statistics", seen)
    bob.goto(f"{live.url}/ui/nowhere")
    _check(bob, "not found", seen)
    _review_pages(signed_in("carol"), bob, live.url, seen)
    anonymous.context.close()
    print("\naxe-core violations by page:")
    for where, found in seen.items():
        print(f"  {where}: {'; '.join(found) or 'none'}")
    blocking = {w: [f for f in found if f.split()[0] in BLOCKING] for w, found in seen.items()}
    assert {w: f for w, f in blocking.items() if f} == {}


def _review_pages(carol: Page, bob: Page, url: str, seen: dict[str, list[str]]) -> None:
    """The reviewer's pages, a refusal and the charts among them; a 403 for others."""
    carol.goto(f"{url}/ui/decisions/stats")
    expect(carol.locator("svg.chart")).to_have_count(6)
    _check(carol, "decision statistics with oversight charts", seen)
    carol.get_by_role("link", name="Review", exact=True).click()
    _check(carol, "review queries", seen)
    carol.get_by_role("link", name="fast_approval").click()
    _check(carol, "review query: a shipped one's form", seen)
    carol.goto(f"{url}/ui/reviews/queries?query=custom&filter=kind+%3D")
    expect(carol.locator("#query-error")).to_be_visible()
    _check(carol, "review query: a refused filter", seen)
    carol.get_by_label("Filter").fill('kind != "expire"')
    carol.get_by_role("button", name="Run the query").click()
    expect(carol.locator("#answer tbody tr").first).to_be_visible()
    _check(carol, "review query: its answer and the open form", seen)
    carol.get_by_label("Sample size").fill("1")
    carol.get_by_role("button", name="Open the review").click()
    _check(carol, "review: open", seen)
    carol.get_by_label("Finding", exact=True).check()
    carol.get_by_role("button", name="Assess item 1").click()
    expect(carol.locator("#refusal")).to_be_visible()
    _check(carol, "review: a refused assessment", seen)
    carol.get_by_label("OK", exact=True).check()
    carol.get_by_role("button", name="Assess item 1").click()
    carol.get_by_role("button", name="Sign off the review").click()
    _check(carol, "review: signed off", seen)
    carol.get_by_role("link", name="All reviews").click()
    _check(carol, "reviews", seen)
    bob.goto(f"{url}/ui/reviews")
    _check(bob, "reviews: not an auditor (403)", seen)


def test_the_stage_and_delegation_pages_have_no_serious_or_critical_violation(
    signed_in: Browse, api: Api, live: Live
) -> None:
    """A staged call's page (stages, a skipped one), the delegation page (empty, refused,
    with a grant), and the decide form offering a vote by delegation."""
    seen: dict[str, list[str]] = {}
    small = api("alice").chat("wireAgent")
    [held_small] = small.send("wire 500 acme").interrupts
    big = api("alice").chat("wireAgent")
    [held] = big.send("wire 500000 acme").interrupts
    for who in ("lee", "tina"):
        api(who).request("POST", f"/v1/chats/{big.id}/resume", json={"approve": [
            {"ref": held.ref, "name": "wire", "input_sha256": held.input_sha256}]})
    lee = signed_in("lee")
    _check(lee, "inbox with staged calls", seen)
    lee.goto(f"{live.url}/ui/chats/{small.id}/interrupts/{held_small.ref}")
    expect(lee.locator("#stages")).to_be_visible()
    _check(lee, "interrupt: a staged call with a skipped stage", seen)
    cora = signed_in("cora")
    cora.goto(f"{live.url}/ui/delegations")
    _check(cora, "delegations: none yet", seen)
    cora.locator("#grant").get_by_label("Delegate").fill("cora")
    cora.locator("#grant").get_by_label("Until").fill("2099-01-01T00:00")
    cora.get_by_role("button", name="Grant the delegation").click()
    expect(cora.locator("#grant-error")).to_be_visible()
    _check(cora, "delegations: a refused grant", seen)
    cora.locator("#grant").get_by_label("Delegate").fill("bob")
    cora.get_by_role("button", name="Grant the delegation").click()
    expect(cora.locator("#notice")).to_be_visible()
    _check(cora, "delegations: granted", seen)
    bob = signed_in("bob")
    bob.goto(f"{live.url}/ui/chats/{big.id}/interrupts/{held.ref}")
    expect(bob.locator("#approve-delegation")).to_be_visible()
    _check(bob, "interrupt: a vote by delegation offered", seen)
    bob.goto(f"{live.url}/ui/delegations")
    _check(bob, "delegations: one granted to you", seen)
    print("\naxe-core violations by page:")
    for where, found in seen.items():
        print(f"  {where}: {'; '.join(found) or 'none'}")
    blocking = {w: [f for f in found if f.split()[0] in BLOCKING] for w, found in seen.items()}
    assert {w: f for w, f in blocking.items() if f} == {}


def test_the_policies_pages_have_no_serious_or_critical_violation(
    signed_in: Browse, api: Api, live: Live
) -> None:
    """The policies page (empty, a refused proposal, with versions), a version's review (a
    diff, a what-if over a recorded call, a refused approval) and a call held under it."""
    seen: dict[str, list[str]] = {}
    pay = api("alice").chat("payAgent")
    pay.send("pay 5000 bob")  # a recorded call for the what-if
    pia = signed_in("pia")
    pia.get_by_role("link", name="Policies").click()
    _check(pia, "policies: none yet", seen)
    form = pia.locator("#propose-form")
    form.get_by_label("Policy id").fill("pay-limits")
    form.get_by_label("Tool").fill("pay")
    form.get_by_label("Policy document (JSON)").fill('{"roles": ["lead"],}')
    form.get_by_label("Reason").fill("leads decide")
    form.get_by_role("button", name="Propose the version").click()
    expect(pia.locator("#propose-error")).to_be_visible()
    _check(pia, "policies: a refused proposal", seen)
    form.get_by_label("Agent").select_option("payAgent")
    form.get_by_label("Policy document (JSON)").fill('{"roles": ["lead"]}')
    form.get_by_role("button", name="Propose the version").click()
    expect(pia.locator("#whatif tbody tr")).to_have_count(1)
    _check(pia, "policy version: proposed, its diff and what-if", seen)
    pia.get_by_role("button", name="Approve version 1").click()
    expect(pia.locator("#refusal")).to_be_visible()
    _check(pia, "policy version: a refused approval", seen)
    ray = signed_in("ray")
    ray.goto(f"{live.url}/ui/policies/pay-limits/versions/1")
    ray.get_by_role("button", name="Approve version 1").click()
    expect(ray.locator("#notice")).to_be_visible()
    _check(ray, "policy version: in force", seen)
    ray.goto(f"{live.url}/ui/policies")
    _check(ray, "policies: one in force", seen)
    later = api("alice").chat("payAgent")
    [held] = later.send("pay 5000 bob").interrupts
    lee = signed_in("lee")
    lee.goto(f"{live.url}/ui/chats/{later.id}/interrupts/{held.ref}")
    expect(lee.locator("#policy-version")).to_be_visible()
    _check(lee, "interrupt: a call held under a data policy", seen)
    print("\naxe-core violations by page:")
    for where, found in seen.items():
        print(f"  {where}: {'; '.join(found) or 'none'}")
    blocking = {w: [f for f in found if f.split()[0] in BLOCKING] for w, found in seen.items()}
    assert {w: f for w, f in blocking.items() if f} == {}


def _tab_to(page: Page, matches: Callable[[], bool], limit: int = 60) -> None:
    """Press Tab until `matches()` (the focused element is the one wanted)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if matches():
            return
    raise AssertionError(f"Tab never reached it; focus is on {page.evaluate(_FOCUSED)}")


_FOCUSED = ("(() => { const e = document.activeElement; return e ? e.outerHTML.slice(0, 120)"
            " : null; })()")


def _focused_text(page: Page) -> str:
    text: str = page.evaluate("document.activeElement ? document.activeElement.textContent : ''")
    return text.strip()


def test_a_whole_approval_by_keyboard_alone(browser: Browser, api: Api, live: Live) -> None:
    chat = api("alice").chat("bankingAgent")
    [ask] = chat.send("Transfer $250 to savings.").interrupts
    page = browser.new_context().new_page()
    page.goto(f"{live.url}/ui/inbox")
    # The key field has the focus on arrival: the browser gives it (autofocus) on a rendering
    # update after the load that goto waits for, so keys typed at once could land nowhere.
    expect(page.get_by_label("API key")).to_be_focused()
    page.keyboard.type("key-bob")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/ui/inbox$"))
    row = page.locator(f'#inbox-rows tr[data-ref="{ask.ref}"]')
    expect(row).to_be_visible()
    _tab_to(page, lambda: page.evaluate("document.activeElement.closest('tr') !== null"
                                        " && document.activeElement.tagName === 'A'"))
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("userApproval")
    _tab_to(page, lambda: page.evaluate("document.activeElement.id") == "respond-feedback")
    page.keyboard.type("fine by me")
    _tab_to(page, lambda: _focused_text(page) == "Approve")
    page.keyboard.press("Enter")
    expect(page.locator("#outcome")).to_be_focused()
    expect(page.locator("#outcome-happened")).to_contain_text("Approved by bob")
    expect(page.locator("#outcome-happened")).to_contain_text("“fine by me”")
    [responded] = [e for e in api("root").open_chat(chat.id).events()
                   if e["type"] == "Responded"]
    assert responded["data"]["output"] == {"approved": True, "feedback": "fine by me"}
    assert responded["actor"] == "bob"
    page.context.close()
