"""A Slack vote by a delegate counts by the delegation that lets them decide (a button names
no delegation): for its delegator, under the same rules as a resume naming it; two such
delegations are refused, and nothing is recorded (issue 42)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.notify.test_notifications import World, _button, _held, world  # noqa: F401


def _delegate(w: World, delegator: str, delegate: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    made: dict[str, Any] = w.api(delegator).request("POST", "/v1/delegations", json={
        "delegate": delegate, "starts_at": (now - timedelta(hours=1)).isoformat(),
        "ends_at": (now + timedelta(days=1)).isoformat(), "roles": ["treasury"]})
    return made


def _votes(w: World, chat_id: str) -> list[dict[str, Any]]:
    return [e for e in w.api("root").open_chat(chat_id).events()
            if e["type"] == "ApprovalVoted"]


def test_a_delegates_slack_vote_counts_for_the_delegator_by_the_one_delegation(
    world: World,  # noqa: F811
) -> None:
    chat_id, held = _held(world)  # treasury, quorum 2
    world.link("UDANA", "dana")  # dana is no treasurer herself
    made = _delegate(world, "tina", "dana")
    said = world.click("UDANA", "approve", _button(chat_id, held)).json()["text"]
    assert said == f"Recorded: dana approved pay for tina (delegation {made['id']})."
    [vote] = _votes(world, chat_id)
    assert (vote["actor"], vote["data"]["for_actor"], vote["data"]["delegation_id"]) == (
        "dana", "tina", made["id"])
    world.api("tina").request("DELETE", f"/v1/delegations/{made['id']}")
    chat2, held2 = _held(world)
    refused = world.click("UDANA", "approve", _button(chat2, held2)).json()["text"]
    assert refused.startswith("Nothing was recorded: dana may not decide pay")  # as herself
    assert _votes(world, chat2) == []


def test_two_delegations_that_would_decide_are_refused_and_record_nothing(
    world: World,  # noqa: F811
) -> None:
    chat_id, held = _held(world)
    world.link("UDANA", "dana")
    _delegate(world, "tina", "dana")
    _delegate(world, "tom", "dana")
    said = world.click("UDANA", "approve", _button(chat_id, held)).json()["text"]
    assert said.startswith("Nothing was recorded: dana decides this by 2 delegations"
                           " (for tina, tom)")
    assert _votes(world, chat_id) == []
