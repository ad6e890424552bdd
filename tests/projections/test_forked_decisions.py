"""A decision made in a fork is in the decision log and the review facts like any other
chat's, though the fork's calls arrive inside its ChatForked event (issue 40)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from interlock.domain import ApproveEntry, Decider, Interlock, RespondEntry
from interlock.projections.views.reviews import ReviewsView
from tests.api.conftest import Live, live  # noqa: F401 - fixtures
from tests.projections.conftest import dumps, rebuilt


def _forked_and_decided(app: Interlock) -> tuple[str, str]:
    """A transfer held for two treasury votes, forked by dana where it was held and
    approved in the fork by tina and tom: (the fork's id, the held call's ref)."""
    chat = app.start_chat("treasuryBankingAgent", actor="alice", tenant="acme")
    [ask] = asyncio.run(app.send(chat.id, "Transfer $2500 to savings.", actor="alice")).interrupts
    [held] = asyncio.run(app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})])).interrupts
    fork = app.fork(chat.id, app.get_chat(chat.id).version, actor="dana", tenant="acme")
    for who in ("tina", "tom"):
        done = asyncio.run(app.resume(fork.id, actor=who, decider=Decider(
            who, frozenset({"treasury"})), votes=[ApproveEntry(ref=held.ref, name=held.name)]))
    assert done.text.startswith("Done.")
    return str(fork.id), held.ref


def test_a_forks_decisions_are_in_the_log_and_the_review_facts_and_rebuild_alike(
        live: Live) -> None:  # noqa: F811
    fork_id, ref = _forked_and_decided(live.service)
    live.views.catch_up()
    with httpx.Client(base_url=live.url) as http:
        answer = http.get("/v1/decisions", params={"chat_id": fork_id},
                          headers={"Authorization": "Bearer key-carol"})
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, Any]] = answer.json()["items"]
    assert sorted((r["ref"], r["tool"], r["kind"], r["actor"]) for r in rows) == [
        (ref, "transferMoney", "approve", "tina"), (ref, "transferMoney", "approve", "tom")]
    assert all(r["original_input"] == {"amount": 2500, "to_account": "savings"} for r in rows)
    assert all(r["requested_at"] and r["fingerprint"] for r in rows)
    facts = [f for f in live.views.view(ReviewsView).dump() if f["chat_id"] == fork_id]
    assert sorted((f["ref"], f["kind"], f["actor"], f["requested_by"]) for f in facts) == [
        (ref, "approve", "tina", "dana"), (ref, "approve", "tom", "dana")]  # dana asked anew
    assert dumps(live.views) == rebuilt(live.service)
