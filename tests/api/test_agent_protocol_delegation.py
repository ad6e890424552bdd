"""A delegate resumes through Agent Protocol as through /v1: the run names the delegation
(LangGraph's `config={"configurable": {"delegation": id}}`, or `delegation`), and the vote
is the delegator's, by the delegate, under the same rules (issue 42)."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import ClientFor, Live
from tests.api.test_agent_protocol import Sdk, _asked, _refused, sdk  # noqa: F401 - fixture
from tests.api.test_approvals import _away


def _accept(held: dict[str, Any]) -> dict[str, Any]:
    return {"resume": {"type": "accept",
                       "input_sha256": held["value"]["interlock"]["input_sha256"]}}


def test_a_delegate_votes_for_the_delegator_through_the_protocol(
    live: Live, client_for: ClientFor, sdk: Sdk  # noqa: F811
) -> None:
    made = _away(client_for, "tina", "dana", roles=["treasury"])
    tid, out = _asked(sdk("alice"), "payAgent", "pay 500 bob-corp")
    [held] = out["__interrupt__"]
    status, error = _refused(lambda: sdk("dana").runs.wait(tid, "payAgent",
                                                            command=_accept(held)))
    assert status == 403 and error["details"]["reason"] == "not_a_decider"  # not hers alone
    sdk("dana").runs.wait(tid, "payAgent", command=_accept(held),
                          config={"configurable": {"delegation": made["id"]}})
    [voted] = [e for e in client_for("root").open_chat(tid).events()
               if e["type"] == "ApprovalVoted"]
    assert (voted["actor"], voted["data"]["for_actor"], voted["data"]["delegation_id"]) == (
        "dana", "tina", made["id"])
    status, error = _refused(lambda: sdk("bob").runs.wait(  # the same gate: not bob's
        tid, "payAgent", command=_accept(held),
        config={"configurable": {"delegation": made["id"]}}))
    assert status == 403 and error["details"]["reason"] == "not_the_delegate"


def test_a_delegation_with_input_or_two_that_differ_is_refused_and_writes_nothing(
    live: Live, client_for: ClientFor, sdk: Sdk  # noqa: F811
) -> None:
    made = _away(client_for, "tina", "dana", roles=["treasury"])
    tid, out = _asked(sdk("alice"), "payAgent", "pay 500 bob-corp")
    [held] = out["__interrupt__"]
    version = client_for("root").open_chat(tid).state()["version"]
    status, error = _refused(lambda: sdk("dana").runs.wait(
        tid, "payAgent", input={"messages": [{"role": "user", "content": "hi"}]},
        config={"configurable": {"delegation": made["id"]}}))
    assert status == 422 and "goes with a resume" in error["message"]
    status, error = _refused(lambda: sdk("dana").runs.wait(
        tid, "payAgent", command=_accept(held),
        config={"configurable": {"delegation": "not-an-id"}}))
    assert status == 422 and "delegation's id" in error["message"]
    assert client_for("root").open_chat(tid).state()["version"] == version
