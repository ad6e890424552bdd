"""Issue 43's console items in a real Chromium: disabled buttons look disabled, the settling
vote and a fork are confirmed first, a fork says what it forks, and the approver's pages speak
in words (fields, amounts, short hashes, the timeline), not in the code's names."""

from __future__ import annotations

import re
from collections.abc import Callable

from playwright.sync_api import Dialog, Page, expect

from interlock.client import Client
from tests.api.conftest import Live
from tests.ui.conftest import Browse, accept_dialogs

Api = Callable[[str], Client]
RED = "rgb(207, 34, 46)"  # --bad, the Reject button's colour when it can be used


def _pay(api: Api, who: str, amount: int, to: str) -> tuple[str, str]:
    chat = api(who).chat("payAgent")
    [held] = chat.send(f"pay {amount} {to}").interrupts
    return chat.id, held.ref


def _answering(page: Page, accept: bool) -> list[str]:
    """Answer the page's confirmations ourselves; the messages asked, in order."""
    asked: list[str] = []
    page.remove_listener("dialog", accept_dialogs)

    def answer(dialog: Dialog) -> None:
        asked.append(dialog.message)
        (dialog.accept if accept else dialog.dismiss)()

    page.on("dialog", answer)
    return asked


def _background(page: Page, selector: str) -> str:
    return str(page.eval_on_selector(selector, "e => getComputedStyle(e).backgroundColor"))


def test_a_disabled_reject_button_is_grey_not_red(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "alice", 500, "acme")
    bob = signed_in("bob")  # an approver, but not of role treasury: he may read, not vote
    bob.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    reject = bob.get_by_role("button", name="Reject")
    expect(reject).to_be_disabled()
    assert _background(bob, 'form[action$="/reject"] button') != RED
    tina = signed_in("tina")  # who may vote sees it red
    tina.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    assert _background(tina, 'form[action$="/reject"] button') == RED


def test_only_the_vote_that_settles_is_confirmed_and_cancelling_sends_nothing(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "alice", 500, "acme")
    url = f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}"
    tina = signed_in("tina")
    first = _answering(tina, accept=True)
    tina.goto(url)
    tina.get_by_role("button", name="Approve").click()
    expect(tina.locator("#policy-tally")).to_have_text("1 of 2 approvals so far")
    assert first == []  # one of two: nothing is decided yet, nothing to confirm
    tom = signed_in("tom")
    asked = _answering(tom, accept=False)
    tom.goto(url)
    expect(tom.locator("#approve-hint")).to_contain_text("your approval decides it")
    tom.get_by_role("button", name="Approve").click()
    expect(tom.locator("#status")).to_have_text("pending")
    assert asked == ["Your approval decides: pay runs with the input shown. Approve?"]
    assert api("root").open_chat(chat_id).state()["interrupts"]  # still waiting: not sent
    yes = signed_in("tom")  # accepts: the vote goes and decides
    yes.goto(url)
    yes.get_by_role("button", name="Approve").click()
    expect(yes.locator("#outcome")).to_be_visible()


def test_a_rejection_that_ends_the_call_is_confirmed(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "alice", 500, "acme")
    tina = signed_in("tina")
    asked = _answering(tina, accept=False)
    tina.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    tina.get_by_label("Reason").fill("not on the vendor list")
    tina.get_by_role("button", name="Reject").click()
    assert asked == ["Your rejection decides: pay does not run, and the agent is told your"
                     " reason. Reject?"]
    expect(tina.locator("#status")).to_have_text("pending")


def test_a_fork_is_confirmed_and_says_what_it_forks_on_its_page_its_call_and_the_inbox(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "alice", 500, "acme")
    alice = signed_in("alice")
    asked = _answering(alice, accept=False)
    alice.goto(f"{live.url}/ui/chats/{chat_id}")
    alice.get_by_role("button", name="Fork from here").click()
    assert len(asked) == 1 and asked[0].startswith("Fork this chat at version ")
    assert alice.url.endswith(chat_id)  # cancelled: no fork
    forker = signed_in("alice")
    forker.goto(f"{live.url}/ui/chats/{chat_id}")
    version = forker.locator('input[name="version"][type="hidden"]').get_attribute("value")
    forker.get_by_role("button", name="Fork from here").click()
    forker.wait_for_url(re.compile(r".*/ui/chats/(?!" + chat_id + r")[0-9a-f-]{36}$"))
    fork_id = forker.url.rsplit("/", 1)[1]
    said = f"Fork of chat {chat_id[:8]} at version {version}, forked by alice"
    expect(forker.locator("#fork-of")).to_contain_text(said)
    expect(forker.locator("#fork-of a")).to_have_attribute(
        "href", f"/ui/chats/{chat_id}?version={version}")
    tina = signed_in("tina")
    row = tina.locator(f'#inbox-rows tr[data-chat="{fork_id}"]')
    expect(row.locator(".fork-row")).to_contain_text(said)
    expect(tina.locator(f'#inbox-rows tr[data-chat="{chat_id}"] .fork-row')).to_have_count(0)
    tina.goto(f"{live.url}/ui/chats/{fork_id}/interrupts/{ref}")
    expect(tina.locator("#fork-of")).to_contain_text(said)
    expect(tina.locator("h1 small")).to_contain_text("in a fork")


def test_the_approval_page_and_inbox_speak_in_words_not_in_the_codes_names(
    signed_in: Browse, api: Api, live: Live
) -> None:
    chat_id, ref = _pay(api, "alice", 2500, "acme")
    api("tina").request("POST", f"/v1/chats/{chat_id}/resume", json={"approve": [
        {"ref": ref, "name": "pay"}]})
    tom = signed_in("tom")
    row = tom.locator(f'#inbox-rows tr[data-chat="{chat_id}"]')
    expect(row.locator("td.input summary")).to_contain_text("amount 2,500.00 · to acme")
    tom.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    main = tom.locator("main")
    expect(tom.locator('#input-fields dd[data-key="amount"]')).to_have_text("2,500.00")
    expect(tom.locator('#input-fields dd[data-key="to"]')).to_have_text("acme")
    sha = tom.locator("#input-sha")
    expect(sha).to_have_text(re.compile(r"^[0-9a-f]{12}…$"))
    expect(sha).to_have_attribute("title", re.compile(r"^[0-9a-f]{64}$"))
    expect(main).to_contain_text("Approval request")
    for code in ("Metadata", "Interrupt", "Ref", '"expires_at"', "['treasury']"):
        expect(main).not_to_contain_text(code)
    tom.goto(f"{live.url}/ui/chats/{chat_id}")
    timeline = tom.locator("#timeline")
    expect(timeline).to_contain_text("Vote: approve by tina")
    expect(timeline).to_contain_text("Approval requested")
    said = " ".join(timeline.locator("strong").all_inner_texts())
    for code in ("ApprovalVoted", "ApprovalRequested", "ToolRequested", "ChatStarted"):
        assert code not in said


def test_a_refusal_names_roles_in_words(signed_in: Browse, api: Api, live: Live) -> None:
    chat_id, ref = _pay(api, "alice", 500, "acme")
    bob = signed_in("bob")
    bob.goto(f"{live.url}/ui/chats/{chat_id}/interrupts/{ref}")
    expect(bob.locator("#why-not")).to_contain_text("it needs the role treasury.")
    expect(bob.locator("#why-not")).not_to_contain_text("[")
