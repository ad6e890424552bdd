"""MCP tools in turns: held by default when they may act, decided, run once, failing softly."""

from __future__ import annotations

import threading
from typing import Any, Literal

import pytest

from interlock import Agent, Approval
from interlock.bootstrap import build_service
from interlock.domain import ApproveEntry, Decider, Interlock, RejectEntry
from interlock.domain.errors import InterlockError
from interlock.domain.runtime.tools import Tool
from interlock.mcp import McpConfig, ToolMatch, close_mcp, mcp_tools
from tests.kit import Effects, FunctionModel, Script, call, make_tools, run, say
from tests.mcp.conftest import CONFIG, Ledger

BOB = Decider("bob", frozenset({"approver"}))


class Billing:
    """A service whose agent has the billing server's tools, and a chat of alice's."""

    def __init__(self, store: str, tools: list[Tool], steps: list[Any],
                 approvals: dict[Any, Approval | None] | None = None) -> None:
        self.script = Script(steps)
        self.agent = Agent(name="billing", system="You refund invoices.", tools=tools,
                           model=FunctionModel(self.script), approvals=approvals or {})
        self.app: Interlock = build_service(store, [self.agent])
        self.chat = self.app.start_chat("billing", actor="alice")

    def send(self, text: str = "go") -> Any:
        return run(self.app.send(self.chat.id, text, actor="alice"))

    def vote(self, *entries: Any, who: Decider = BOB) -> Any:
        return run(self.app.resume(self.chat.id, votes=list(entries), actor=who.id, decider=who))

    def tool_output(self, index: int = -1) -> Any:
        tools = [m for m in self.script.requests[index].messages if m.role == "tool"]
        part = tools[-1].content[0].tool_response
        assert part is not None
        return part.output


REFUND = call(("refund", {"invoice": "INV-7", "amount": 40}, "r1"))


def test_a_read_only_tool_runs_without_approval(spec: str, ledger: Ledger,
                                                sqlite_store: str) -> None:
    billing = Billing(sqlite_store, mcp_tools(spec, config=CONFIG),
                      [call(("balance", {"account": "A1"}, "b1")), say("done")])
    result = billing.send()
    assert result.finish_reason == "stop" and result.interrupts == []
    assert billing.tool_output() == {"result": "A1: 120 EUR"}
    assert [c["input"] for c in ledger.calls()] == [{"account": "A1"}]


def test_a_destructive_tool_is_held_then_called_once_with_the_idempotency_key(
    spec: str, ledger: Ledger, sqlite_store: str
) -> None:
    billing = Billing(sqlite_store, mcp_tools(spec, config=CONFIG), [REFUND, say("refunded")])
    held = billing.send()
    assert held.finish_reason == "interrupted" and held.interrupts[0].approval is not None
    assert ledger.calls() == []
    done = billing.vote(ApproveEntry(ref="r1", name="refund"))
    assert done.finish_reason == "stop" and done.text == "refunded"
    assert billing.tool_output() == {"invoice": "INV-7", "refunded": 40}
    with pytest.raises(InterlockError):
        billing.vote(ApproveEntry(ref="r1", name="refund"))  # decided: refused, nothing runs
    assert [(c["tool"], c["key"]) for c in ledger.calls()] == [
        ("refund", f"{billing.chat.id}:r1:1")]


def test_a_rejected_call_never_reaches_the_server(spec: str, ledger: Ledger,
                                                  sqlite_store: str) -> None:
    billing = Billing(sqlite_store, mcp_tools(spec, config=CONFIG), [REFUND, say("ok")])
    billing.send()
    done = billing.vote(RejectEntry(ref="r1", name="refund", reason="not ours"))
    assert done.finish_reason == "stop"
    assert billing.tool_output() == {"rejected": True, "by": "bob", "reason": "not ours"}
    assert ledger.calls() == []


def test_a_tool_without_annotations_is_held_too(spec: str, ledger: Ledger,
                                               sqlite_store: str) -> None:
    billing = Billing(sqlite_store, mcp_tools(spec, config=CONFIG),
                      [call(("archive", {"invoice": "INV-7"}, "a1")), say("ok")])
    assert billing.send().finish_reason == "interrupted" and ledger.calls() == []


def test_invalid_input_from_the_model_fails_the_call_and_never_reaches_the_server(
    spec: str, ledger: Ledger, sqlite_store: str
) -> None:
    billing = Billing(sqlite_store, mcp_tools(spec, config=CONFIG),
                      [call(("refund", {"invoice": "INV-7", "amount": "lots"}, "r1")),
                       say("sorry")])
    result = billing.send()
    assert result.finish_reason == "stop"
    error = billing.tool_output()["error"]
    assert error.startswith("invalid input for refund") and "'lots' is not of type" in error
    assert ledger.calls() == []


def test_the_server_s_error_goes_back_to_the_model(spec: str, ledger: Ledger,
                                                   sqlite_store: str) -> None:
    billing = Billing(sqlite_store, mcp_tools(spec, config=CONFIG),
                      [call(("refund", {"invoice": "INV-7", "amount": -3}, "r1")), say("ok")])
    billing.send()
    assert billing.vote(ApproveEntry(ref="r1", name="refund")).finish_reason == "stop"
    assert "the amount must be positive" in str(billing.tool_output())


def test_a_server_killed_mid_call_fails_the_call_and_the_chat_goes_on(
    ledger: Ledger, sqlite_store: str, request: pytest.FixtureRequest, spec: str
) -> None:
    billing = Billing(sqlite_store, mcp_tools(spec, config=CONFIG), [
        call(("crash", {"invoice": "INV-7"}, "c1")), say("the server fell over"),
        call(("balance", {"account": "A1"}, "b1")), say("balance read")])
    billing.send()
    failed = billing.vote(ApproveEntry(ref="c1", name="crash"))
    assert failed.finish_reason == "stop" and failed.text == "the server fell over"
    assert "McpCallError" in str(billing.tool_output())
    if spec.startswith("http"):  # its host restarts it; a stdio server is restarted by us
        request.getfixturevalue("http_server").restart()
    later = billing.send("and my balance?")
    assert later.finish_reason == "stop" and billing.tool_output() == {"result": "A1: 120 EUR"}
    assert [c["tool"] for c in ledger.calls()] == ["crash", "balance"]


def test_policies_name_mcp_tools_by_server_name_and_annotation(
    spec: str, ledger: Ledger, sqlite_store: str
) -> None:
    auditors = Approval(roles=["auditor"])
    tools = mcp_tools(spec, config=CONFIG)
    billing = Billing(sqlite_store, tools, [
        call(("archive", {"invoice": "INV-7"}, "a1"), ("balance", {"account": "A1"}, "b1")),
        say("ok")], approvals={
            ToolMatch(server="billing", name="archive"): None,  # this agent trusts archive
            ToolMatch(annotations={"readOnlyHint": True}): auditors})
    held = billing.send()
    assert [i.name for i in held.interrupts] == ["balance"]
    assert held.interrupts[0].approval["terms"]["roles"] == ["auditor"]  # type: ignore[index]
    assert [c["tool"] for c in ledger.calls()] == ["archive"]
    with pytest.raises(ValueError, match="approvals match no tool"):
        Agent(name="x", system="", tools=tools, model="openai:gpt-4.1-mini",
              approvals={ToolMatch(server="payroll"): auditors})


def test_the_fingerprint_names_the_server_and_local_tools_stay_as_they_were(
    spec: str, sqlite_store: str
) -> None:
    billing = Billing(sqlite_store, mcp_tools(spec, config=CONFIG), [])
    described = billing.agent.described()["tools"]
    refund = next(t for t in described if t["name"] == "refund")  # type: ignore[attr-defined]
    assert refund["provenance"]["server"] == "billing"
    assert refund["annotations"] == {"destructiveHint": True}
    assert refund["approval"]["roles"] == ["approver"]
    local = Agent(name="l", system="s", tools=make_tools(Effects()), model="openai:gpt-4.1-mini")
    assert all("provenance" not in t and "annotations" not in t  # type: ignore[operator]
               for t in local.described()["tools"])  # type: ignore[attr-defined]


def test_racing_approvals_call_the_mcp_tool_once(spec: str, ledger: Ledger, store: str) -> None:
    tools = mcp_tools(spec, config=CONFIG)
    first = Billing(store, tools, [REFUND, say("refunded")])
    first.send()
    racers = [build_service(store, [first.agent]) for _ in range(2)]
    barrier = threading.Barrier(2)
    for app in racers:
        _meet_before_first_commit(app, barrier)  # both have loaded and decided: a true race
    outcomes: list[str] = []

    def approve(app: Interlock, who: Decider) -> None:
        try:
            run(app.resume(first.chat.id, votes=[ApproveEntry(ref="r1", name="refund")],
                           actor=who.id, decider=who))
            outcomes.append("ok")
        except InterlockError as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=approve, args=(app, Decider(name, frozenset({"approver"}))))
               for app, name in zip(racers, ("bob", "dana"), strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for app in racers:
        app.close()
    # The loser's vote lost the commit; the service explains it: the other decided first.
    assert sorted(outcomes) == ["interrupt_not_pending", "ok"]
    assert len(ledger.calls("refund")) == 1


def _meet_before_first_commit(app: Interlock, barrier: threading.Barrier) -> None:
    insert = app.recorder.insert_events
    met: list[bool] = []

    def meeting(stored: Any, **kw: Any) -> Any:
        if not met:
            met.append(True)
            barrier.wait(timeout=10)
        return insert(stored, **kw)

    app.recorder.insert_events = meeting  # type: ignore[method-assign]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])  # legacy: stateful HTTP sessions
def test_a_turn_resumed_after_its_server_restarted_reconnects_and_runs_once(
    spec: str, ledger: Ledger, sqlite_store: str, request: pytest.FixtureRequest,
    protocol: Literal["auto", "legacy"]
) -> None:
    tools = mcp_tools(spec, config=McpConfig(timeout=10, protocol=protocol))
    billing = Billing(sqlite_store, tools, [REFUND, say("refunded")])
    billing.send()
    if spec.startswith("http"):
        request.getfixturevalue("http_server").restart()
    else:
        close_mcp()  # as a process that served the send and exited: its server is gone
    later = Billing(sqlite_store, tools, [say("refunded")])  # days later, another process
    done = run(later.app.resume(billing.chat.id, votes=[ApproveEntry(ref="r1", name="refund")],
                                actor="bob", decider=BOB))
    assert done.finish_reason == "stop" and done.text == "refunded"
    assert later.tool_output() == {"invoice": "INV-7", "refunded": 40}
    assert [c["tool"] for c in ledger.calls()] == ["refund"]


def test_a_policy_s_when_reads_an_mcp_tool_s_json_input(
    spec: str, ledger: Ledger, sqlite_store: str
) -> None:
    over_100 = Approval(when=lambda i: i["amount"] > 100)
    billing = Billing(sqlite_store, mcp_tools(spec, config=CONFIG), [
        REFUND, say("small one done"), call(("refund", {"invoice": "INV-8", "amount": 500}, "r2")),
        say("big one done")], approvals={"refund": over_100})
    assert billing.send().text == "small one done"
    assert billing.send("and INV-8").finish_reason == "interrupted"
    assert [c["input"]["amount"] for c in ledger.calls("refund")] == [40]
