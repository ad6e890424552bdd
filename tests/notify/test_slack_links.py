"""Slack identity links: a Slack user counts as a principal only once that principal confirmed
it with a one-time code under its own credentials; an admin removes links, never makes one for
someone else. Driven over HTTP and signed Slack callbacks, as in test_notifications.py."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from interlock.bootstrap import build_service
from interlock.client import ForbiddenError, InvalidRequestError, RouteNotFoundError
from interlock.domain.channels import ChannelSet, channels_id
from interlock.domain.chat.events import now
from interlock.domain.errors import ConcurrencyError
from interlock.domain.links import CODE_TTL, SlackLinked, code_sha256, new_code
from tests.notify.test_notifications import World, _button, _held, _posted

CONFIRM = "/v1/channels/slack/links/confirm"
LINKS = "/v1/channels/slack/links"


def _stream(world: World) -> list[Any]:
    return list(world.notifier.service.events.get(channels_id("acme")))


def _decisions(world: World, chat_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = world.api("carol").decisions(chat_id=chat_id)["items"]
    return items


def test_the_admin_cannot_vote_as_two_approvers_from_one_slack_user(world: World) -> None:
    """The attack of issue 40: map one's own Slack user to A, vote, remap it to B, vote."""
    chat_id, held = _held(world)  # treasury, quorum 2: tina and tom
    root = world.api("root")
    start = int(time.time())  # two clicks a second apart, so never one signature twice
    for ago, victim in enumerate(("tina", "tom")):
        mapped = world.client.put("/v1/channels/slack", json={"users": {"UROOT": victim}},
                                  headers={"Authorization": "Bearer key-root"})
        assert mapped.status_code == 422 and "confirms its own link" in mapped.text
        proposal = root.request("POST", LINKS, json={"slack_user": "UROOT", "principal": victim})
        assert proposal["principal"] == victim and proposal["proposed_by"] == "root"
        with pytest.raises(ForbiddenError, match=f"only {victim} confirms it"):
            root.request("POST", CONFIRM, json={"code": proposal["code"]})
        answer = world.click("UROOT", "approve", _button(chat_id, held), at=start - ago)
        assert answer.status_code == 200, answer.text
        assert answer.json()["text"].startswith("Nothing was recorded: your Slack user UROOT "
                                                "is not linked")
    assert _decisions(world, chat_id) == []
    chat = world.notifier.service.get_chat(UUID(chat_id))
    assert [c.ref for c in chat.pending_interrupts()] == [held.ref]  # still waits for two
    assert "UROOT" not in {link["slack_user"] for link in root.request("GET", LINKS)["items"]}


def test_a_link_counts_once_its_principal_confirmed_it_and_names_both_actors(
    world: World,
) -> None:
    chat_id, held = _held(world)
    told = world.command("UNEW").json()["text"]
    assert told.startswith("Your link code is ") and "tenant acme" in told
    early = world.click("UNEW", "approve", _button(chat_id, held), at=time.time() - 1)
    assert "is not linked" in early.text
    link = world.link("UNEW", "dana")  # dana is no treasurer: linked, yet not routed
    assert link["slack_user"] == "UNEW" and link["principal"] == "dana"
    assert (link["proposed_by"], link["confirmed_by"]) == ("slack:UNEW", "dana")
    [event] = [e for e in _stream(world) if isinstance(e, SlackLinked)
               and e.slack_user == "UNEW"]
    assert (event.proposed_by, event.confirmed_by, event.replaced) == ("slack:UNEW", "dana", None)
    refused = world.click("UNEW", "approve", _button(chat_id, held)).json()["text"]
    assert refused.startswith("Nothing was recorded: dana may not decide pay")
    assert world.api("dana").request("GET", LINKS)["items"] == [link]  # one's own links


def test_remapping_needs_the_new_principal_and_leaves_votes_with_whom_cast_them(
    world: World,
) -> None:
    chat_id, held = _held(world)
    assert world.click("UTINA", "approve", _button(chat_id, held)).status_code == 200
    moved = world.link("UTINA", "bob")  # UTINA asks for a code again; bob confirms it
    assert moved["principal"] == "bob"
    [event] = [e for e in _stream(world) if isinstance(e, SlackLinked) and e.principal == "bob"]
    assert event.replaced == "tina"
    [row] = _decisions(world, chat_id)
    assert row["actor"] == "tina" and row["resumed_metadata"]["slack_user"] == "UTINA"


def test_a_principal_proposes_for_itself_only_and_confirms_with_its_own_key(
    world: World,
) -> None:
    with pytest.raises(ForbiddenError, match="for itself only"):
        world.api("bob").request("POST", LINKS, json={"slack_user": "UBOB", "principal": "tina"})
    proposal = world.api("bob").request("POST", LINKS, json={"slack_user": "UBOB"})
    assert proposal["principal"] == "bob" and len(proposal["code"]) == 11
    with pytest.raises(ForbiddenError):  # not the principal the code is for
        world.api("tina").request("POST", CONFIRM, json={"code": proposal["code"]})
    link = world.api("bob").request("POST", CONFIRM, json={"code": proposal["code"].lower()})
    assert (link["proposed_by"], link["confirmed_by"]) == ("bob", "bob")


def test_a_wrong_expired_reused_or_foreign_code_is_refused_and_writes_nothing(
    world: World,
) -> None:
    service = world.notifier.service
    channels = service.channels.get("acme")
    stale = new_code()
    channels.propose_link("USTALE", principal=None, proposed_by="slack:USTALE",
                          code_sha256=code_sha256("acme", stale),
                          at=now() - CODE_TTL - timedelta(seconds=1))
    service.save_stream(channels.id, channels.seal(service.sealer.sign))
    fresh = world.api("tom").request("POST", LINKS, json={"slack_user": "UTOM2"})["code"]
    world.api("tom").request("POST", CONFIRM, json={"code": fresh})
    before = len(_stream(world))
    refusals = [("tom", stale, "expired at"), ("tom", "ABCDE-FGHJK", "no such link code"),
                ("tom", fresh, "used already"), ("eve", fresh, "no such link code")]
    for who, code, why in refusals:
        with pytest.raises(InvalidRequestError, match=why) as refused:
            world.api(who).request("POST", CONFIRM, json={"code": code})
        assert refused.value.status == 422
    assert len(_stream(world)) == before
    assert fresh not in str([e.model_dump() for e in _stream(world)])  # only its hash is kept


def test_only_an_admin_or_the_linked_principal_removes_a_link(world: World) -> None:
    chat_id, held = _held(world)
    with pytest.raises(ForbiddenError):
        world.api("bob").request("DELETE", f"{LINKS}/UTINA")
    own = world.client.delete(f"{LINKS}/UTINA", headers={"Authorization": "Bearer key-tina"})
    assert own.status_code == 204
    root = world.client.delete(f"{LINKS}/UTOM", headers={"Authorization": "Bearer key-root"})
    assert root.status_code == 204
    with pytest.raises(RouteNotFoundError):
        world.api("root").request("DELETE", f"{LINKS}/UTOM")
    assert "is not linked" in world.click("UTOM", "approve", _button(chat_id, held)).text
    world.notifier.run_once()
    assert _posted(world) == []  # nobody is linked: no Slack message
    assert _decisions(world, chat_id) == []


def test_an_admins_mapping_of_old_counts_for_nobody_until_confirmed(world: World) -> None:
    """A stream written before links: its `users` are shown as unconfirmed and not used."""
    service = world.notifier.service
    channels = service.channels.get("acme")
    channels._record(ChannelSet(
        originator_id=channels.id, originator_version=channels.version + 1, timestamp=now(),
        tenant="acme", kind="slack", config={"users": {"UOLD": "tom"}, "quiet_hours": None},
        actor="root"))
    service.save_stream(channels.id, channels.seal(service.sealer.sign))
    chat_id, held = _held(world)
    said = world.click("UOLD", "approve", _button(chat_id, held)).json()["text"]
    assert "an admin's mapping no longer counts" in said
    assert world.api("root").request("GET", LINKS)["unconfirmed"] == {"UOLD": "tom"}
    listed = world.api("root").request("GET", "/v1/channels")["items"]
    assert [c["config"] for c in listed if c["kind"] == "slack"] == [{"quiet_hours": None}]
    world.notifier.run_once()
    assert sorted(p["channel"] for p in _posted(world)) == ["UTINA", "UTOM"]


@pytest.mark.parametrize(("timestamp", "signature"), [
    ("abc", "v0=00"), ("9" * 5000, "v0=00"), ("1e9", "v0=00"), ("1_7", "v0=00"),
    (None, "v0=\xe9"),
])
def test_malformed_slack_headers_answer_401_and_record_nothing(
    world: World, timestamp: str | None, signature: str,
) -> None:
    chat_id, _ = _held(world)
    headers = {"X-Slack-Request-Timestamp": (timestamp or str(int(time.time()))).encode(),
               "X-Slack-Signature": signature.encode("latin-1"),
               "Content-Type": b"application/x-www-form-urlencoded"}
    body = b"payload=%7B%7D"
    answer = world.client.post("/v1/integrations/slack/actions", content=body, headers=headers)
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthenticated"
    assert _decisions(world, chat_id) == []


@pytest.mark.parametrize("payload", ["[1]", '"text"', '{"user": "UTINA", "actions": []}',
                                     '{"type": "view_submission", "user": {"id": "UTINA"},'
                                     ' "view": {"private_metadata": 1, "state": []}}'])
def test_a_signed_payload_of_another_shape_is_refused_in_words(
    world: World, payload: str,
) -> None:
    answer = world.callback({}, body=f"payload={payload}".encode())
    assert answer.status_code in (200, 422), answer.text
    assert answer.status_code == 422 or "not one Interlock sent" in answer.json()["text"]


def test_two_confirmations_racing_on_one_code_one_wins(store: str) -> None:
    service = build_service(store, [])
    try:
        code, _ = service.channels.propose_link("acme", "URACE", principal=None,
                                                proposer="slack:URACE")
        first, second = service.channels.get("acme"), service.channels.get("acme")
        sha = code_sha256("acme", code)
        first.confirm_link(sha, confirmer="tina", at=now())
        second.confirm_link(sha, confirmer="tom", at=now())
        service.save_stream(first.id, first.seal(service.sealer.sign))
        with pytest.raises(ConcurrencyError):
            service.save_stream(second.id, second.seal(service.sealer.sign))
        assert service.channels.get("acme").linked() == {"URACE": "tina"}
    finally:
        service.close()
