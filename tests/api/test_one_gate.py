"""One gate: every surface that records a decision meets the same rules, refused alike and
writing nothing. The table crosses the surfaces (/v1, Agent Protocol, the console, Slack, and
a fork of the chat decided over /v1) with the rules a vote must pass; the retry path, which
records no vote, is held to the rule that nothing runs before its approvals.

The world is the notify tests' (tests/notify/test_notifications.py): a served payAgent whose
`pay` over 100 needs two treasurers (tina, tom), mail and Slack, Slack users linked by their
principals (UTINA, UTOM, UALICE; UBOB here)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from interlock.client import Interrupt
from interlock.domain.chat.canonical import sha256_hex
from tests.api.agents import PAID
from tests.notify import test_notifications
from tests.notify.test_notifications import World

world = test_notifications.world  # the fixture
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
SLACK_USERS = {"tina": "UTINA", "tom": "UTOM", "alice": "UALICE", "bob": "UBOB",
               "root": "UROOT", "bea": "UBEA", "tex": "UTEX", "lee": "ULEE", "ray": "URAY"}
EDITED = {"amount": 400, "to": "bob-corp"}


@dataclass(frozen=True)
class Held:
    """A held payment as a surface decides it: its chat, call and the input's hash."""

    chat_id: str
    ref: str
    input_sha256: str
    agent: str = "payAgent"
    name: str = "pay"

    @classmethod
    def of(cls, chat_id: str, held: Interrupt, agent: str = "payAgent") -> Held:
        return cls(chat_id, held.ref, held.input_sha256 or "", agent, held.name)


@dataclass(frozen=True)
class Vote:
    who: str
    kind: str  # approve | edit
    sha: str | None = None  # the input the voter saw (None: the one the call holds)
    reason: str | None = None


# What a surface answers: refused (status, a word of its reason) or None when recorded.
Answer = tuple[int, str] | None
Surface = Callable[[World, Held, Vote], Answer]


def _v1(world: World, held: Held, vote: Vote) -> Answer:
    entry: dict[str, Any] = {"ref": held.ref, "name": held.name,
                             "input_sha256": vote.sha or held.input_sha256}
    if vote.kind == "edit":
        entry["input"] = EDITED
        entry |= {} if vote.reason is None else {"reason": vote.reason}
    answer = world.client.post(f"/v1/chats/{held.chat_id}/resume", json={vote.kind: [entry]},
                               headers={"Authorization": f"Bearer key-{vote.who}"})
    return _json_answer(answer)


def _agent_protocol(world: World, held: Held, vote: Vote) -> Answer:
    value: dict[str, Any] = {"type": "accept" if vote.kind == "approve" else "edit",
                             "input_sha256": vote.sha or held.input_sha256}
    if vote.kind == "edit":
        value["args"] = EDITED
        value |= {} if vote.reason is None else {"reason": vote.reason}
    answer = world.client.post(
        f"/agent-protocol/threads/{held.chat_id}/runs/wait",
        json={"assistant_id": held.agent, "command": {"resume": value}},
        headers={"Authorization": f"Bearer key-{vote.who}"})
    return _json_answer(answer)


def _json_answer(answer: httpx.Response) -> Answer:
    if answer.status_code == 200:
        return None
    error = answer.json()["error"]
    return answer.status_code, f"{error['code']} {error['message']} {error.get('details')}"


def _console(world: World, held: Held, vote: Vote) -> Answer:
    with httpx.Client(base_url=f"{world.url}/ui") as browser:  # keeps its cookies
        page = browser.get("/sign-in")
        signed = browser.post("/sign-in", data={"csrf": CSRF.findall(page.text)[0],
                                                "api_key": f"key-{vote.who}"})
        assert signed.status_code == 303, signed.text
        here = f"/chats/{held.chat_id}/interrupts/{held.ref}"
        form = {"csrf": CSRF.findall(browser.get(here).text)[0],
                "input_sha256": vote.sha or held.input_sha256}
        if vote.kind == "edit":
            form |= {"amount": str(EDITED["amount"]), "to": str(EDITED["to"])}
            form |= {} if vote.reason is None else {"__reason__": vote.reason}
        answer = browser.post(f"{here}/{vote.kind}", data=form)
    if answer.status_code == 200 and not re.search(r"Refused|class=\"error", answer.text):
        return None
    return answer.status_code, answer.text


def _slack(world: World, held: Held, vote: Vote) -> Answer:
    if vote.kind != "approve":
        return 0, "not offered"  # Slack's message carries Approve and Reject only
    button = json.dumps({"chat_id": held.chat_id, "ref": held.ref,
                         "input_sha256": vote.sha or held.input_sha256})
    text = world.click(SLACK_USERS[vote.who], "approve", button).json()["text"]
    return (200, text) if text.startswith("Nothing was recorded") else None


def _held(world: World, agent: str = "payAgent") -> Held:
    """A held payment of 500 (payAgent: two treasurers; wireAgent: the lead, then treasury)."""
    chat = world.api("alice").chat(agent)
    turn = chat.send(f"{'wire' if agent == 'wireAgent' else 'pay'} 500 bob-corp")
    assert turn.finish_reason == "interrupted"
    return Held.of(chat.id, turn.interrupts[0], agent)


def _forked(world: World, agent: str = "payAgent") -> Held:
    """The same held payment, in a fork dana made of the chat: decided there over /v1."""
    source = _held(world, agent)
    fork = world.api("dana").request("POST", f"/v1/chats/{source.chat_id}/fork",
                                     json={"version": _version(world, source)})
    return _current(world, Held(fork["id"], source.ref, source.input_sha256, agent, source.name))


def _current(world: World, held: Held) -> Held:
    """`held` as it is now (an edit changed its input)."""
    [call] = world.api("carol").open_chat(held.chat_id).state()["interrupts"]
    return Held(held.chat_id, call["ref"], call["input_sha256"], held.agent, held.name)


def _version(world: World, held: Held) -> int:
    version: int = world.api("carol").open_chat(held.chat_id).state()["version"]
    return version


SURFACES: dict[str, tuple[Surface, Callable[[World, str], Held]]] = {
    "v1": (_v1, _held), "agent_protocol": (_agent_protocol, _held),
    "console": (_console, _held), "slack": (_slack, _held), "fork": (_v1, _forked)}


@dataclass(frozen=True)
class Rule:
    before: tuple[Vote, ...]  # votes recorded first, over /v1 (an edit names the reason)
    attempt: Vote
    status: int  # the refusal's status over JSON surfaces (the console shows it too)
    says: str  # a pattern every surface's refusal matches
    stale: bool = False  # the attempt names the input as first asked, not as it is now
    agent: str = "payAgent"  # whose held call: wireAgent's is staged
    data_policy: bool = False  # pay is held under a data policy pia proposed and ray approved


ROOT_EDITS = Vote("root", "edit", reason="the invoice says 400")  # root asks for 400 now
RULES = {
    "four_eyes": Rule((ROOT_EDITS,), Vote("root", "approve"), 403, "someone else must decide"),
    "routing": Rule((), Vote("bob", "approve"), 403, "may not decide"),
    "one_vote_each": Rule((Vote("tom", "approve"),), Vote("tom", "approve"), 409, "already"),
    "stale_input": Rule((ROOT_EDITS,), Vote("tom", "approve"), 409,
                        "another input|input changed",
                        stale=True),
    "edit_has_a_reason": Rule((), Vote("tom", "edit"), 422, "reason"),
    # bea (lead and treasurer) approved the lead's stage: not treasury's too
    "one_stage_each": Rule((Vote("bea", "approve"),), Vote("bea", "approve"), 403,
                           "voted in stage", agent="wireAgent"),
    "conflicting_roles": Rule((Vote("lee", "approve"),), Vote("tex", "approve"), 403,
                              "conflicting roles", agent="wireAgent"),
    # ray (a treasurer) approved the version of pay's policy the call is held under
    "policy_author": Rule((), Vote("ray", "approve"), 403,
                          "ray approved policy pay-limits version 1", data_policy=True),
}


def _data_policy(world: World) -> None:
    """pay held for one treasurer under a data policy: pia proposes it, ray approves it."""
    world.api("pia").request("POST", "/v1/policies", json={
        "id": "pay-limits", "agent": "payAgent", "tool": "pay", "reason": "one treasurer",
        "document": {"roles": ["treasury"]}})
    world.api("ray").request("POST", "/v1/policies/pay-limits/versions/1/approve",
                             json={"reason": "reviewed"})


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_refuses_alike_and_writes_nothing(
        world: World, surface: str, rule: str) -> None:
    decide, hold = SURFACES[surface]
    r = RULES[rule]
    for user in ("bob", "root", "bea", "tex", "lee", "ray"):
        world.link(SLACK_USERS[user], user)
    if r.data_policy:
        _data_policy(world)
    held = hold(world, r.agent)
    for vote in r.before:
        assert _v1(world, held, vote) is None
    now = held if r.stale else _current(world, held)
    version, paid = _version(world, held), len(PAID)
    answer = decide(world, now, r.attempt)
    assert answer is not None, f"{surface} recorded what {rule} refuses"
    status, text = answer
    if (status, text) == (0, "not offered"):
        assert surface == "slack" and r.attempt.kind == "edit"
    else:
        assert re.search(r.says, text), text
        assert status == (200 if surface == "slack" else r.status), text
    assert (_version(world, held), len(PAID)) == (version, paid)  # nothing written, none paid


def test_the_fork_counts_its_source_requester_and_carries_no_votes(world: World) -> None:
    """root asked for 400 in the source, tom approved it there; dana forks before it ran."""
    source = _held(world)
    assert _v1(world, source, ROOT_EDITS) is None
    source = _current(world, source)
    assert _v1(world, source, Vote("tom", "approve")) is None
    forked = world.api("dana").request("POST", f"/v1/chats/{source.chat_id}/fork",
                                       json={"version": _version(world, source)})
    held = _current(world, Held(forked["id"], source.ref, source.input_sha256))
    refused = _v1(world, held, Vote("root", "approve"))
    assert refused is not None and refused[0] == 403  # the source's requester asks here too
    assert _v1(world, held, Vote("tom", "approve")) is None  # his source vote is not carried
    assert [p for p in PAID if p["chat"] == held.chat_id] == []  # one of two: nothing ran


def test_a_retry_runs_nothing_before_its_approvals(world: World) -> None:
    held = _held(world)
    assert _v1(world, held, Vote("tom", "approve")) is None  # one of two
    version, paid = _version(world, held), len(PAID)
    for who in ("alice", "tom", "root"):
        answer = world.client.post(f"/v1/chats/{held.chat_id}/retry",
                                   headers={"Authorization": f"Bearer key-{who}"})
        assert answer.status_code in (403, 409), answer.text
    assert (_version(world, held), len(PAID)) == (version, paid)
    assert sha256_hex({"amount": 500, "to": "bob-corp"}) == held.input_sha256
