"""Approval policies in the service: held before running, votes, quorum, four eyes, expiry."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from interlock import Agent, Approval, FunctionModel, ToolContext, tool
from interlock.bootstrap import build_service
from interlock.domain import (
    ApproveEntry,
    Decider,
    EditEntry,
    Interlock,
    RejectEntry,
    RespondEntry,
    RestartEntry,
)
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.errors import (
    AlreadyVotedError,
    ApprovalRequiredError,
    ForbiddenError,
    IdempotencyKeyReusedError,
    InterruptExpiredError,
    InvalidToolInputError,
    NotAnApprovalError,
    StaleInterruptError,
    UnknownInterruptError,
)
from tests.kit import Script, call, run, say


class Pay(BaseModel):
    amount: int
    to: str = "acme"


def treasurer(name: str) -> Decider:
    return Decider(name, frozenset({"treasury"}))


class Bank:
    """A service whose `pay` tool needs approval over 100 and whose `ask` interrupts itself."""

    def __init__(self, store: str, policy: Approval, steps: list[Any] | None = None) -> None:
        self.paid: list[dict[str, Any]] = []
        paid = self.paid

        @tool(name="pay", approval=policy)
        async def pay(input: Pay, ctx: ToolContext) -> dict[str, Any]:
            paid.append(input.model_dump())
            return {"paid": input.amount}

        @tool(name="ask", interrupts=True, side_effects=False)
        async def ask(input: Pay, ctx: ToolContext) -> dict[str, Any]:
            if not ctx.resumed:
                ctx.interrupt({"confirm": input.amount})
            return {"confirmed": True}

        self.script = Script(steps or [call(("pay", {"amount": 500}, "p1")), say("done")])
        agent = Agent(name="bank", system="pay", tools=[pay, ask],
                      model=FunctionModel(self.script))
        self.app: Interlock = build_service(store, [agent])
        self.chat = self.app.start_chat("bank", actor="alice")

    def send(self) -> Any:
        return run(self.app.send(self.chat.id, "go", actor="alice"))

    def vote(self, who: Decider, *entries: Any) -> Any:
        return run(self.app.resume(self.chat.id, votes=list(entries), actor=who.id, decider=who))

    def version(self) -> int:
        return self.app.get_chat(self.chat.id).version

    def tool_response(self) -> Any:
        tools = [m for m in self.script.requests[-1].messages if m.role == "tool"]
        part = tools[-1].content[0].tool_response
        assert part is not None
        return part.output


APPROVE = ApproveEntry(ref="p1", name="pay")


def test_a_call_is_held_before_it_runs_with_its_policy_recorded(store: str) -> None:
    bank = Bank(store, Approval(when=lambda p: p.amount > 100, roles=["treasury"], quorum=2))
    result = bank.send()
    assert result.finish_reason == "interrupted" and bank.paid == []
    held = result.interrupts[0]
    assert held.approval is not None and held.approval["terms"]["quorum"] == 2
    events = bank.app.chat_events(bank.chat.id)
    requested = [e for e in events if type(e).__name__ == "ApprovalRequested"]
    assert requested[0].terms.roles == ["treasury"]  # type: ignore[attr-defined]


def test_when_false_runs_the_tool_without_asking(store: str) -> None:
    bank = Bank(store, Approval(when=lambda p: p.amount > 1000),
                [call(("pay", {"amount": 5}, "p1")), say("done")])
    assert bank.send().finish_reason == "stop" and bank.paid == [{"amount": 5, "to": "acme"}]


def test_quorum_needs_distinct_approvers_and_never_the_requester(store: str) -> None:
    bank = Bank(store, Approval(roles=["treasury"], quorum=2))
    bank.send()
    before = bank.version()
    with pytest.raises(ForbiddenError) as refused:
        bank.vote(treasurer("Alice "), APPROVE)  # the requester, however spelt
    assert refused.value.details["reason"] == "requester"
    with pytest.raises(ForbiddenError) as outsider:
        bank.vote(Decider("mallory", frozenset({"approver"})), APPROVE)
    assert outsider.value.details["reason"] == "not_a_decider"
    assert bank.version() == before  # refusals write nothing
    assert bank.vote(treasurer("bob"), APPROVE).finish_reason == "interrupted"
    with pytest.raises(AlreadyVotedError) as again:
        bank.vote(treasurer("BOB"), APPROVE)
    assert again.value.details["vote"] == "approve"
    assert bank.paid == []
    done = bank.vote(treasurer("carol"), APPROVE)
    assert done.finish_reason == "stop" and done.text == "done"
    assert bank.paid == [{"amount": 500, "to": "acme"}]
    assert bank.tool_response() == {"paid": 500}


def test_a_rejection_tells_the_model_who_and_why_and_the_turn_goes_on(store: str) -> None:
    bank = Bank(store, Approval(roles=["treasury"], quorum=2))
    bank.send()
    bank.vote(treasurer("bob"), APPROVE)
    done = bank.vote(treasurer("carol"), RejectEntry(ref="p1", name="pay", reason="too much"))
    assert done.finish_reason == "stop" and bank.paid == []
    assert bank.tool_response() == {"rejected": True, "by": "carol", "reason": "too much"}


def test_an_edit_is_validated_kept_and_needs_someone_else_to_approve_it(store: str) -> None:
    bank = Bank(store, Approval(roles=["treasury"]))
    bank.send()
    with pytest.raises(InvalidToolInputError):
        bank.vote(treasurer("bob"), EditEntry(ref="p1", name="pay", input={"amount": "x"},
                                              reason="a smaller amount"))
    with pytest.raises(InvalidToolInputError):  # taken as sent: "90" is not the number 90
        bank.vote(treasurer("bob"), EditEntry(ref="p1", name="pay", input={"amount": "90"},
                                              reason="a smaller amount"))
    bank.vote(treasurer("bob"), EditEntry(ref="p1", name="pay", input={"amount": 90},
                                          reason="a smaller amount"))
    with pytest.raises(ForbiddenError):  # bob asked for this input now
        bank.vote(treasurer("bob"), APPROVE)
    with pytest.raises(StaleInterruptError):  # D29: a yes naming no input was given on 500
        bank.vote(treasurer("alice"), APPROVE)
    seen = sha256_hex({"amount": 90, "to": "acme"})
    done = bank.vote(treasurer("alice"), APPROVE.model_copy(update={"input_sha256": seen}))
    assert done.finish_reason == "stop" and bank.paid == [{"amount": 90, "to": "acme"}]
    call_ = bank.app.get_chat(bank.chat.id).state.calls["p1"]
    assert call_.original_input == {"amount": 500} and call_.input == {"amount": 90, "to": "acme"}


def test_respond_cannot_bypass_a_policy_nor_a_vote_decide_a_tool_interrupt(store: str) -> None:
    bank = Bank(store, Approval(roles=["treasury"]),
                [call(("pay", {"amount": 500}, "p1"), ("ask", {"amount": 1}, "a1")), say("ok")])
    bank.send()
    before = bank.version()
    with pytest.raises(ApprovalRequiredError):
        run(bank.app.resume(bank.chat.id, respond=[RespondEntry(ref="p1", name="pay")],
                            actor="bob"))
    with pytest.raises(NotAnApprovalError):
        bank.vote(treasurer("bob"), ApproveEntry(ref="a1", name="ask"))
    with pytest.raises(UnknownInterruptError):  # one bad entry refuses the whole batch
        run(bank.app.resume(bank.chat.id, votes=[APPROVE, ApproveEntry(ref="x", name="pay")],
                            actor="bob", decider=treasurer("bob")))
    assert bank.version() == before
    answer = RespondEntry(ref="a1", name="ask", output={})
    mixed = run(bank.app.resume(bank.chat.id, respond=[answer],
                                votes=[APPROVE], actor="bob",
                                decider=Decider("bob", frozenset({"treasury", "approver"}))))
    assert mixed.finish_reason == "stop" and bank.paid == [{"amount": 500, "to": "acme"}]


def test_an_approved_tool_may_still_interrupt_itself(store: str) -> None:
    steps = [call(("ask", {"amount": 1}, "a1")), say("ok")]
    bank = Bank(store, Approval(), steps)
    bank.app.agents["bank"] = Agent(
        name="bank", system="pay", tools=bank.app.agents["bank"].tools,
        model=FunctionModel(bank.script), approvals={"ask": Approval(roles=["treasury"])})
    first = bank.send()
    assert first.interrupts[0].approval is not None
    second = bank.vote(treasurer("bob"), ApproveEntry(ref="a1", name="ask"))
    assert second.finish_reason == "interrupted" and second.interrupts[0].approval is not None
    assert second.interrupts[0].metadata == {"confirm": 1}  # now the tool's own interrupt
    done = run(bank.app.resume(bank.chat.id, restart=[RestartEntry(ref="a1", name="ask")],
                               actor="bob"))
    assert done.finish_reason == "stop"


def test_an_expired_approval_fails_closed_and_the_model_is_told(store: str) -> None:
    bank = Bank(store, Approval(roles=["treasury"], expires_in=timedelta(milliseconds=50)))
    bank.send()
    time.sleep(0.06)
    with pytest.raises(InterruptExpiredError):
        bank.vote(treasurer("bob"), APPROVE)
    assert run(bank.app.expire_due(bank.chat.id, "p1")) == "expired"
    assert run(bank.app.expire_due(bank.chat.id, "p1")) == ""  # exactly once
    assert bank.paid == [] and bank.tool_response()["expired"] is True
    assert bank.app.get_chat(bank.chat.id).state.finish_reason == "stop"
    with pytest.raises(InterruptExpiredError) as late:
        bank.vote(treasurer("bob"), APPROVE)
    assert "expired_at" in late.value.details


def test_escalation_widens_who_may_decide(store: str) -> None:
    bank = Bank(store, Approval(roles=["treasury"], escalate_after=timedelta(milliseconds=20),
                                escalate_to=["cfo"]))
    bank.send()
    cfo = Decider("zoe", frozenset({"cfo"}))
    with pytest.raises(ForbiddenError):
        bank.vote(cfo, APPROVE)
    time.sleep(0.03)
    assert run(bank.app.expire_due(bank.chat.id, "p1")) == "escalated"
    assert bank.vote(cfo, APPROVE).finish_reason == "stop"


def test_withdraw_by_the_requester_tells_the_model(store: str) -> None:
    bank = Bank(store, Approval(roles=["treasury"]))
    bank.send()
    with pytest.raises(ForbiddenError):
        run(bank.app.withdraw(bank.chat.id, ["p1"], reason="oops", decider=treasurer("bob")))
    done = run(bank.app.withdraw(bank.chat.id, ["p1"], reason="wrong account",
                                 decider=Decider("alice")))
    assert done.finish_reason == "stop" and bank.paid == []
    assert bank.tool_response() == {"withdrawn": True, "by": "alice", "reason": "wrong account"}


def test_four_eyes_hold_through_a_restart_that_replaces_the_input(store: str) -> None:
    """Issue 9: bob restarts with his own input, the tool interrupts again; bob cannot answer."""
    deploys: list[str] = []

    @tool(name="deploy", interrupts=True, distinct_approver=True)
    async def deploy(input: Pay, ctx: ToolContext) -> dict[str, Any]:
        if not (ctx.resumed or {}).get("ok"):
            ctx.interrupt({"needs": "ok"})
        deploys.append(input.to)
        return {"ok": True}

    agent = Agent(name="ops", system="", tools=[deploy],
                  model=FunctionModel(Script([call(("deploy", {"amount": 1}, "d1"))])))
    app = build_service(store, [agent])
    chat = app.start_chat("ops", actor="alice")
    run(app.send(chat.id, "go", actor="alice"))
    run(app.resume(chat.id, restart=[RestartEntry(ref="d1", name="deploy",
                                                  replace_input={"amount": 1, "to": "bob"})],
                   actor="bob"))
    for spelling in ("bob", "Bob", "bob "):
        with pytest.raises(ForbiddenError):
            run(app.resume(chat.id, restart=[RestartEntry(
                ref="d1", name="deploy", resumed_metadata={"ok": True})], actor=spelling))
    assert deploys == []
    seen = sha256_hex({"amount": 1, "to": "bob"})
    run(app.resume(chat.id, restart=[RestartEntry(ref="d1", name="deploy", input_sha256=seen,
                                                  resumed_metadata={"ok": True})], actor="dana"))
    assert deploys == ["bob"]


def test_an_idempotency_key_reused_with_other_votes_is_refused(store: str) -> None:
    bank = Bank(store, Approval(roles=["treasury"], quorum=2))
    bank.send()
    bob = treasurer("bob")
    first = run(bank.app.resume(bank.chat.id, votes=[APPROVE], actor="bob", decider=bob,
                                idempotency_key="v-1"))
    again = run(bank.app.resume(bank.chat.id, votes=[APPROVE], actor="bob", decider=bob,
                                idempotency_key="v-1"))
    assert again.model_dump(exclude={"position"}) == first.model_dump(exclude={"position"})
    before = bank.version()
    reject = RejectEntry(ref="p1", name="pay", reason="changed my mind")
    with pytest.raises(IdempotencyKeyReusedError):
        run(bank.app.resume(bank.chat.id, votes=[reject], actor="bob", decider=bob,
                            idempotency_key="v-1"))
    assert bank.version() == before and bank.paid == []
