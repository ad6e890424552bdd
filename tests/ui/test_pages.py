"""The console over plain HTTP: cookies behind HTTPS, dev mode, redirects, bad queries, order."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import httpx
import pytest

from interlock.api.app import make_app
from interlock.client import Client
from tests.api.conftest import Live
from tests.api.server import ThreadServer

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture
def browser_like(live: Live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, follow_redirects=False) as c:
        yield c


def _signed_in(c: httpx.Client, key: str, **headers: str) -> httpx.Response:
    page = c.get("/ui/sign-in", headers=headers)
    token = _CSRF.search(page.text)
    assert token is not None
    # Sent by hand: a client keeps a Secure cookie from a plain-HTTP test server to itself.
    cookie = {"Cookie": f"interlock_csrf={page.cookies['interlock_csrf']}"}
    return c.post("/ui/sign-in", data={"csrf": token[1], "api_key": key,
                                       "next": "https://evil.example/"},
                  headers={**headers, **cookie})


def test_behind_https_the_session_cookie_is_secure(browser_like: httpx.Client) -> None:
    answer = _signed_in(browser_like, "key-bob", **{"X-Forwarded-Proto": "https"})
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"].lower()
    assert "interlock_session=" in cookie
    assert all(flag in cookie for flag in ("secure", "httponly", "samesite=strict"))


def test_sign_in_goes_only_to_console_pages(browser_like: httpx.Client) -> None:
    answer = _signed_in(browser_like, "key-bob")
    assert answer.headers["location"] == "/ui/inbox"


def test_in_dev_mode_a_loopback_visitor_is_dev(live: Live) -> None:
    server = ThreadServer(make_app(live.service, live.views))
    try:
        page = httpx.get(f"{server.url}/ui/inbox")
    finally:
        server.stop()
    assert page.status_code == 200
    assert "Signed in as <strong>dev</strong>" in page.text


@pytest.mark.parametrize(("path", "says"), [
    ("/ui/decisions?since=yesterday", "since is not a date or date-time"),
    ("/ui/decisions?until=0001-01-01T00:00:00%2B01:00", "until is out of range once in UTC"),
    ("/ui/decisions/stats?since=9999-12-31T23:59:59-01:00", "since is out of range once in UTC"),
    ("/ui/decisions/export?since=9999-12-31T23:59:59-01:00", "since is out of range once"),
    ("/ui/inbox?order=sideways", "order"),
    ("/ui/chats/not-a-uuid", "chat_id"),
])
def test_a_bad_query_is_a_422_page_not_an_error(
    browser_like: httpx.Client, path: str, says: str
) -> None:
    _signed_in(browser_like, "key-bob")
    answer = browser_like.get(path)
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert says in answer.text


def test_a_form_that_is_not_url_encoded_is_refused(browser_like: httpx.Client) -> None:
    _signed_in(browser_like, "key-bob")
    answer = browser_like.post("/ui/sign-out", json={"csrf": "x"})
    assert answer.status_code == 422
    assert "x-www-form-urlencoded" in answer.text


def test_the_inbox_orders_oldest_or_newest_first_and_decisions_filter_by_kind(
    browser_like: httpx.Client, api: Callable[[str], Client]
) -> None:
    alice = api("alice")
    refs = []
    for service in ("one", "two"):
        chat = alice.chat("opsAgent")
        refs.append((chat.id, chat.send(f"deploy {service}").interrupts[0].ref))
    _signed_in(browser_like, "key-bob")
    rows = re.compile(r'<summary>service (\w+)<span')  # each row's input in words
    assert rows.findall(browser_like.get("/ui/inbox").text) == ["one", "two"]
    assert rows.findall(browser_like.get("/ui/inbox?order=newest").text) == ["two", "one"]
    chat_id, ref = refs[0]
    api("bob").request("POST", f"/v1/chats/{chat_id}/resume", json={
        "respond": [{"ref": ref, "name": "deploy", "output": {"status": "ok"}}]})
    respond = browser_like.get("/ui/decisions?kind=respond&agent=opsAgent").text
    assert respond.count("<td>respond</td>") == 1
    restart = browser_like.get("/ui/decisions?kind=restart").text
    assert "No decision matches" in restart
    assert "No decision matches" in browser_like.get("/ui/decisions?agent=bankingAgent").text


def test_the_decision_log_shows_votes_with_their_reason_outcome_and_rules(
    browser_like: httpx.Client, api: Callable[[str], Client]
) -> None:
    chats = []
    for amount in (300, 400):
        chat = api("alice").chat("payAgent")
        chats.append((chat.id, chat.send(f"pay {amount} acme").interrupts[0].ref))
    (approved, ref_a), (rejected, ref_r) = chats
    api("tina").request("POST", f"/v1/chats/{approved}/resume", json={
        "approve": [{"ref": ref_a, "name": "pay"}]})
    api("tom").request("POST", f"/v1/chats/{rejected}/resume", json={
        "reject": [{"ref": ref_r, "name": "pay", "reason": "not <b>on</b> the list"}]})
    _signed_in(browser_like, "key-bob")
    page = browser_like.get("/ui/decisions?kind=reject").text
    assert page.count("<td>reject</td>") == 1 and "<td>approve</td>" not in page
    assert "“not &lt;b&gt;on&lt;/b&gt; the list”" in page  # escaped, never markup
    assert re.search(r'rules <code title="agent fingerprint [0-9a-f]{64}">', page)
    approvals = browser_like.get("/ui/decisions?kind=approve&actor=tina").text
    assert re.search(r'<td class="detail">\s*pending\s*</td>', approvals)
