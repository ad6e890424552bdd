"""Console sessions live on the server: sign-out ends them for every copy of the cookie,
they expire, the cookie carries nothing derived from the key, and a form's CSRF token
belongs to one session."""

from __future__ import annotations

import hashlib
import re

import httpx
import pytest

from interlock.stores.console_sessions import open_sessions
from tests.api.conftest import Live

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class Visitors:
    """Requests that carry only the cookies each one names: several visitors, one server."""

    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, cookie: str = "") -> httpx.Response:
        return httpx.get(self.url + path, headers={"Cookie": cookie} if cookie else {})

    def post(self, path: str, data: dict[str, str], cookie: str) -> httpx.Response:
        return httpx.post(self.url + path, data=data, headers={"Cookie": cookie})


@pytest.fixture
def browser_like(live: Live) -> Visitors:
    return Visitors(live.url)


def _token(page: httpx.Response) -> str:
    found = _CSRF.search(page.text)
    assert found is not None
    return found[1]


def _sign_in(c: Visitors, key: str) -> str:
    """Sign in as a browser would; the session cookie's value."""
    page = c.get("/ui/sign-in")
    nonce = page.cookies["interlock_csrf"]
    answer = c.post("/ui/sign-in", {"csrf": _token(page), "api_key": key},
                    f"interlock_csrf={nonce}")
    assert answer.status_code == 303
    return str(answer.cookies["interlock_session"])


def _inbox(c: Visitors, session: str) -> httpx.Response:
    return c.get("/ui/inbox", f"interlock_session={session}")


def _signed_in(answer: httpx.Response) -> bool:
    if answer.status_code == 200:
        return True
    assert answer.status_code == 303 and "/ui/sign-in" in answer.headers["location"]
    return False


def test_sign_out_ends_the_session_for_a_copied_cookie_too(browser_like: Visitors) -> None:
    session = _sign_in(browser_like, "key-bob")
    copied = session  # what someone who saw the cookie keeps
    page = _inbox(browser_like, session)
    assert _signed_in(page)
    out = browser_like.post("/ui/sign-out", {"csrf": _token(page)},
                            f"interlock_session={session}")
    assert out.status_code == 303
    assert not _signed_in(_inbox(browser_like, copied))


def test_signing_in_again_ends_the_browsers_previous_session(browser_like: Visitors) -> None:
    before = _sign_in(browser_like, "key-bob")
    page = browser_like.get("/ui/sign-in", f"interlock_session={before}")
    again = browser_like.post("/ui/sign-in", {"csrf": _token(page), "api_key": "key-alice"},
                              f"interlock_session={before}")
    assert again.status_code == 303
    assert not _signed_in(_inbox(browser_like, before))
    assert _signed_in(_inbox(browser_like, str(again.cookies["interlock_session"])))


def test_the_cookie_is_a_random_id_with_nothing_of_the_key(browser_like: Visitors) -> None:
    first, second = _sign_in(browser_like, "key-bob"), _sign_in(browser_like, "key-bob")
    assert first != second and len(first) == 43
    digest = hashlib.sha256(b"key-bob").hexdigest()
    assert "key-bob" not in first and digest not in first
    assert _signed_in(_inbox(browser_like, first)) and _signed_in(_inbox(browser_like, second))


def test_a_session_expires(live: Live) -> None:
    sessions = open_sessions(live.service)
    sessions.add("s", "key digest", expires=1_000, now=0)
    assert sessions.key_of("s", now=999) == "key digest"
    assert sessions.key_of("s", now=1_000) is None
    sessions.add("t", "key digest", expires=3_000, now=2_000)  # a sign-in drops expired rows
    assert sessions.key_of("s", now=0) is None


def test_a_csrf_token_of_no_session_or_of_another_is_refused(
    browser_like: Visitors,
) -> None:
    """A planted anonymous token (nonce cookie and its token) does not pass a signed-in
    visitor's form, nor does a token of someone else's session."""
    victim = _sign_in(browser_like, "key-bob")
    anonymous = browser_like.get("/ui/sign-in")
    planted = f"interlock_csrf={anonymous.cookies['interlock_csrf']}"
    forged = browser_like.post("/ui/sign-out", {"csrf": _token(anonymous)},
                               f"interlock_session={victim}; {planted}")
    assert forged.status_code == 403
    other = _inbox(browser_like, _sign_in(browser_like, "key-alice"))
    forged = browser_like.post("/ui/sign-out", {"csrf": _token(other)},
                               f"interlock_session={victim}")
    assert forged.status_code == 403
    assert _signed_in(_inbox(browser_like, victim))  # neither ended the victim's session
    own = browser_like.post("/ui/sign-out", {"csrf": _token(_inbox(browser_like, victim))},
                            f"interlock_session={victim}")
    assert own.status_code == 303
