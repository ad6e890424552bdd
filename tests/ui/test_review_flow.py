"""A reviewer's whole flow in Chromium: run a query, open a review of a seeded sample, assess
(ok, a finding, a segregation refusal on a call they decided), sign off, close, download the
evidence pack, and check it offline with the checkpoint's public key alone."""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.audit.signing import Signer
from interlock.bootstrap import build_service
from interlock.client import Client
from interlock.projections import open_read_models
from interlock.stores.console_sessions import open_sessions
from tests.api.conftest import KEYS
from tests.api.server import ThreadServer
from tests.review.test_evidence import verifier
from tests.ui.agents import AGENTS
from tests.ui.conftest import sign_in

# rita approves calls and reviews them too: the rule keeps her off the calls she decided.
REVIEW_KEYS = {**KEYS, "key-rita": {"id": "rita", "tenant": "acme",
                                    "roles": ["approver", "auditor"]}}


class ReviewLive:
    """A live server whose evidence packs are signed with `signer`."""

    def __init__(self, store: str, signer: Signer | None) -> None:
        self.service = build_service(store, AGENTS)
        self.views = open_read_models(self.service)
        self.server = ThreadServer(make_app(self.service, self.views,
                                            AuthConfig.from_mapping(REVIEW_KEYS), signer=signer,
                                            sessions=open_sessions(self.service)))
        self.url = self.server.url

    def client(self, name: str) -> Client:
        return Client(self.url, api_key=f"key-{name}")

    def close(self) -> None:
        self.server.stop()
        self.views.close()
        self.service.close()


@pytest.fixture
def signer() -> Signer:
    return Signer.generate()


@pytest.fixture
def served(pg_store: str, signer: Signer) -> Iterator[ReviewLive]:
    live = ReviewLive(pg_store, signer)
    try:
        yield live
    finally:
        live.close()


def _decided(live: ReviewLive) -> dict[str, str]:
    """Three transfers asked by alice: bob approves two, rita the third; chat id by approver."""
    alice, who = live.client("alice"), {}
    for n, approver in enumerate(("bob", "bob", "rita")):
        chat = alice.chat("bankingAgent")
        [ask] = chat.send(f"Transfer ${100 + n} to savings.").interrupts
        with live.client(approver) as c:
            c.open_chat(chat.id).decide(ask.respond({"approved": True, "feedback": "fine"}))
        who[chat.id] = approver
    alice.close()
    return who


def _page(browser: Browser, live: ReviewLive, name: str) -> Page:
    page = browser.new_context(accept_downloads=True).new_page()
    sign_in(page, live.url, f"key-{name}")
    page.wait_for_url("**/ui/inbox**")
    return page


def _assess(page: Page, n: int, verdict: str, severity: str = "", note: str = "") -> None:
    item = page.locator(f"#item-{n}")
    item.get_by_label("OK" if verdict == "ok" else "Finding", exact=True).check()
    if severity:
        item.get_by_label("Severity of a finding").select_option(severity)
    if note:
        item.get_by_label("Note").fill(note)
    item.get_by_role("button", name=f"Assess item {n}").click()


def test_a_reviewers_whole_flow(browser: Browser, served: ReviewLive, signer: Signer,
                                tmp_path: Path) -> None:
    approvers = _decided(served)
    page = _page(browser, served, "rita")
    page.get_by_role("link", name="Review", exact=True).click()
    expect(page.locator("h1")).to_have_text("Review queries")
    page.get_by_role("link", name="custom").click()
    page.get_by_label("Filter").fill('tool = "userApproval"')
    page.get_by_role("button", name="Run the query").click()
    expect(page.locator("#answer tbody tr")).to_have_count(3)
    expect(page.locator("#answer tbody")).to_contain_text("rita")
    page.get_by_label("Sample size").fill("3")
    page.get_by_label("approver (who decided)").check()
    page.get_by_label("Seed").fill("flow-1")
    page.get_by_role("button", name="Open the review").click()
    expect(page).to_have_url(re.compile(r"/ui/reviews/[0-9a-f-]{36}$"))
    expect(page.locator("#review-seed")).to_have_text("flow-1")
    expect(page.locator("#review-meta")).to_contain_text("stratified by actor")
    review_id = page.url.rsplit("/", 1)[1]
    items = page.locator("#items > li")
    expect(items).to_have_count(3)
    actors = [items.nth(i).locator("h3").inner_text().rsplit(" by ", 1)[1] for i in range(3)]
    mine = actors.index("rita") + 1
    others = [n for n in (1, 2, 3) if n != mine]
    _assess(page, mine, "ok")
    refusal = page.locator("#refusal")
    expect(refusal).to_contain_text(f"You may not assess item {mine}: you decided or voted on it")
    assert refusal.get_attribute("data-code") == "segregation_of_duties"
    _assess(page, others[0], "ok")
    expect(page.locator(f"#item-{others[0]} .assessment")).to_contain_text("OK")
    _assess(page, others[1], "finding", "high", "approved without a second look")
    expect(page.locator(f"#item-{others[1]} .assessment")).to_contain_text("Finding, high")
    page.get_by_label("Statement").fill("sampled and read")
    page.get_by_role("button", name="Sign off the review").click()
    expect(page.locator("#refusal")).to_contain_text("1 item(s) are not assessed yet")
    with served.client("carol") as carol:  # another auditor assesses rita's own call
        carol.request("POST", f"/v1/reviews/{review_id}/items/{mine}/assessment",
                      json={"verdict": "ok", "note": "checked by carol"})
    page.goto(f"{served.url}/ui/reviews/{review_id}")
    page.get_by_label("Statement").fill("sampled and read")
    page.get_by_role("button", name="Sign off the review").click()
    expect(page.locator("#signed-off")).to_contain_text("by rita")
    expect(page.locator("#signed-off")).to_contain_text("“sampled and read”")
    page.get_by_role("button", name="Close the review").click()
    expect(page.locator("#review-status")).to_have_text("closed")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the signed evidence pack").click()
    pack, public = tmp_path / "pack.zip", tmp_path / "cp.pub"
    download.value.save_as(pack)
    public.write_text(signer.public.hex())
    code, out = verifier(str(pack), "--public-key", str(public))
    assert (code, out.strip().splitlines()[-1]) == (0, "evidence pack verifies")
    with zipfile.ZipFile(pack) as z:
        manifest = json.loads(z.read("manifest.json"))
        findings = json.loads(z.read("findings.json"))
    assert (manifest["review_id"], manifest["sample"]["seed"]) == (review_id, "flow-1")
    assert manifest["sample"]["strata"] == ["actor"]
    assert findings["findings"] == 1 and findings["status"] == "closed"
    assert {i["chat_id"]: i["actor"] for i in findings["items"]} == approvers
    page.context.close()


def test_others_get_a_page_saying_the_reviews_are_for_auditors(
    browser: Browser, served: ReviewLive,
) -> None:
    page = _page(browser, served, "bob")
    expect(page.get_by_role("link", name="Review", exact=True)).to_have_count(0)
    answer = page.goto(f"{served.url}/ui/reviews/queries")
    assert answer is not None and answer.status == 403
    expect(page.locator(".notice.error")).to_have_text(
        "The review pages are for auditors: bob lacks the auditor role.")
    page.context.close()
