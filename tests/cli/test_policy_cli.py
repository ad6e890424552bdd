"""`interlock policy list|data-what-if` over a store: the same answer as POST .../what-if."""

from __future__ import annotations

import asyncio
import json

import pytest

from interlock.bootstrap import service_from
from interlock.cli.main import main
from interlock.domain import ApproveEntry, Decider
from interlock.domain.policy_book import PolicyDesk, PolicyDocument, PolicyProposal
from interlock.settings import load_settings
from tests.api.agents import AGENTS


def test_what_if_prints_each_recorded_call_and_the_counts(
    sqlite_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    service = service_from(load_settings(store=sqlite_store), with_agents=False)
    service.agents = {a.name: a for a in AGENTS}  # the server's agents, for its turns
    service.models = {a.name: a.model for a in AGENTS}  # type: ignore[misc]
    for amount, approvers in ((500, ("tina", "tom")), (50, ()), (5000, ("tina",))):
        chat = service.start_chat("payAgent", actor="alice", tenant="acme")
        turn = asyncio.run(service.send(chat.id, f"pay {amount} bob", actor="alice",
                                        tenant="acme"))
        for who in approvers:
            held = turn.interrupts[0]
            entry = ApproveEntry(ref=held.ref, name="pay", input_sha256=held.input_sha256)
            asyncio.run(service.resume(chat.id, votes=[entry], actor=who, tenant="acme",
                                       decider=Decider(who, frozenset({"treasury"}))))
    PolicyDesk(service).propose("acme", Decider("pia", frozenset({"policy_admin"})),
                                PolicyProposal(id="pay-limits", agent="payAgent", tool="pay",
                                               reason="treasury alone over 1000",
                                               document=PolicyDocument.model_validate({
                                                   "roles": ["treasury"], "when": {
                                                       "path": "amount", "op": ">",
                                                       "value": 1000}})))
    service.close()
    assert main(["policy", "list", "--store", sqlite_store, "--tenant", "acme"]) == 0
    [listed] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (listed["id"], listed["version"], listed["state"]) == ("pay-limits", 1, "proposed")
    assert main(["policy", "data-what-if", "pay-limits", "--store", sqlite_store,
                 "--tenant", "acme"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert sorted((c["was_held"], c["held"], c["verdict"]) for c in result["calls"]) == [
        (False, False, "runs"), (True, False, "runs"), (True, True, "passes")]
    assert (result["counts"]["calls"], result["counts"]["no_longer_held"]) == (3, 1)
    assert main(["policy", "data-what-if", "nope", "--store", sqlite_store,
                 "--tenant", "acme"]) == 2
    assert "policy nope not found" in capsys.readouterr().err
