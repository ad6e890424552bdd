"""The console's Slack link page: a principal signed in as itself confirms its code there;
another's, a used or a wrong code is refused on the page and writes nothing."""

from __future__ import annotations

from interlock.client import Client
from interlock.domain.channels import channels_id
from tests.ui.conftest import ConsoleLive
from tests.ui.test_sessions import Visitors, _sign_in, _token


def _confirm(c: Visitors, session: str, code: str) -> tuple[int, str]:
    cookie = f"interlock_session={session}"
    page = c.get("/ui/slack-link", cookie)
    nonce = page.cookies["interlock_csrf"]
    answer = c.post("/ui/slack-link", {"csrf": _token(page), "code": code},
                    f"{cookie}; interlock_csrf={nonce}")
    return answer.status_code, answer.text


def test_a_principal_confirms_its_own_code_in_the_console(live: ConsoleLive) -> None:
    with Client(live.url, api_key="key-bob") as bob:
        code = bob.request("POST", "/v1/channels/slack/links", json={"slack_user": "UBOB"})["code"]
    c = Visitors(live.url)
    stream = channels_id("acme")
    before = len(list(live.service.events.get(stream)))
    status, text = _confirm(c, _sign_in(c, "key-tina"), code)
    assert status == 403 and "only bob confirms it" in text
    status, text = _confirm(c, _sign_in(c, "key-bob"), "WRONG-CODE1")
    assert status == 422 and "no such link code" in text
    assert len(list(live.service.events.get(stream))) == before
    bob_session = _sign_in(c, "key-bob")
    status, text = _confirm(c, bob_session, code)
    assert status == 200 and "now votes as bob" in text and "<code>UBOB</code>" in text
    assert live.service.channels.get("acme").linked() == {"UBOB": "bob"}
    status, text = _confirm(c, bob_session, code)
    assert status == 422 and "used already" in text
