"""A fork is a new request by the one who forks: its calls that had not run are asked
afresh, with no votes, the forker and the source's requester among their requesters, and
the source call's idempotency key (issue 40, "Fork pays twice")."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel

from interlock import Agent, Approval, FunctionModel, ToolContext, tool
from interlock.bootstrap import build_service
from interlock.domain import ApproveEntry, Decider, Interlock, RestartEntry
from interlock.domain.chat.fork_events import ChatForked
from interlock.domain.errors import AlreadyVotedError, ForbiddenError, NothingToRetryError
from interlock.domain.results import StreamEvent
from tests.kit import Script, call, run, say


class Pay(BaseModel):
    amount: int


def treasurer(name: str) -> Decider:
    return Decider(name, frozenset({"treasury"}))


class Payments:
    """A `pay` tool held for `quorum` treasury approvers, an `ask` tool that interrupts
    itself, and every run of either with its idempotency key."""

    def __init__(self, store: str, quorum: int = 1, first: str = "pay") -> None:
        self.runs: list[tuple[str, str]] = []
        runs = self.runs

        @tool(name="pay", approval=Approval(roles=["treasury"], quorum=quorum))
        async def pay(input: Pay, ctx: ToolContext) -> dict[str, Any]:
            runs.append(("pay", ctx.idempotency_key))
            return {"paid": input.amount}

        @tool(name="ask", interrupts=True)
        async def ask(input: Pay, ctx: ToolContext) -> dict[str, Any]:
            if not ctx.resumed:
                ctx.interrupt({"confirm": input.amount})
            runs.append(("ask", ctx.idempotency_key))
            return {"confirmed": True}

        steps = [call((first, {"amount": 500}, "pay1")), *[say("done")] * 8]
        self.agent = Agent(name="bank", system="pay", tools=[pay, ask],
                           model=FunctionModel(Script(steps)))
        self.app: Interlock = build_service(store, [self.agent])
        self.chat_id = self.app.start_chat("bank", actor="alice", tenant="acme").id
        run(self.app.send(self.chat_id, "pay the invoice", actor="alice"))

    def vote(self, chat_id: UUID, who: str) -> Any:
        return run(self.app.resume(chat_id, votes=[ApproveEntry(ref="pay1", name="pay")],
                                   actor=who, decider=treasurer(who)))

    def version(self, chat_id: UUID) -> int:
        return self.app.get_chat(chat_id).version


async def gone(event: StreamEvent) -> None:
    """A streaming client that went away as a tool was about to run."""
    if event.type == "tool_request":
        raise ConnectionResetError("client gone")


@pytest.fixture
def bank(store: str) -> Any:
    made: list[Payments] = []

    def make(quorum: int = 1, first: str = "pay") -> Payments:
        made.append(Payments(store, quorum, first))
        return made[-1]

    yield make
    for b in made:
        b.app.close()


def test_a_forked_held_call_pays_once_its_fresh_approval_is_given_and_keeps_the_key(
        bank: Any) -> None:
    b = bank()
    held_at = b.version(b.chat_id)
    fork = b.app.fork(b.chat_id, held_at, actor="mallory", tenant="acme")
    b.vote(b.chat_id, "tina")  # the source pays
    for requester in ("mallory", "alice", "ALICE "):  # who forked, who asked in the source
        with pytest.raises(ForbiddenError) as refused:
            b.vote(fork.id, requester)
        assert refused.value.details["reason"] == "requester"
    assert [r for r, _ in b.runs] == ["pay"]
    [pending] = b.app.get_chat(fork.id).pending_interrupts()
    assert pending.forked is not None and pending.forked.by == ["mallory"]
    assert (pending.forked.chat_id, pending.forked.ref) == (b.chat_id, "pay1")
    b.vote(fork.id, "tom")
    assert b.runs == [("pay", f"{b.chat_id}:pay1:1")] * 2  # one key: the payee deduplicates


def test_a_fork_carries_no_votes_so_a_quorum_starts_from_nothing(bank: Any) -> None:
    b = bank(quorum=2)
    b.vote(b.chat_id, "tina")
    fork = b.app.fork(b.chat_id, b.version(b.chat_id), actor="mallory", tenant="acme")
    [pending] = fork.pending_interrupts()
    assert pending.approval is not None and pending.approval.votes == []
    assert pending.approval.forked_from == pending.forked
    b.vote(fork.id, "tina")  # tina's vote in the source does not count here: she may vote
    with pytest.raises(AlreadyVotedError):
        b.vote(fork.id, "tina")
    assert b.runs == [] and b.app.get_chat(fork.id).status == "interrupted"
    b.vote(b.chat_id, "tom")
    b.vote(fork.id, "tom")
    assert [r for r, _ in b.runs] == ["pay", "pay"]


def test_a_fork_of_a_fork_keeps_the_first_sources_key_and_all_forkers_ask(bank: Any) -> None:
    b = bank()
    first = b.app.fork(b.chat_id, b.version(b.chat_id), actor="mallory", tenant="acme")
    second = b.app.fork(first.id, first.version, actor="nina", tenant="acme")
    [pending] = second.pending_interrupts()
    assert pending.forked is not None
    assert (pending.forked.chat_id, pending.forked.key_chat_id) == (first.id, b.chat_id)
    assert (pending.forked.requested_by, pending.forked.by) == ("alice", ["mallory", "nina"])
    for requester in ("alice", "mallory", "nina"):
        with pytest.raises(ForbiddenError):
            b.vote(second.id, requester)
    b.vote(second.id, "tom")
    assert b.runs == [("pay", f"{b.chat_id}:pay1:1")]


def test_an_approved_call_not_yet_run_is_held_afresh_in_a_fork_and_retry_runs_nothing(
        bank: Any) -> None:
    b = bank()
    run(b.app.resume(b.chat_id, votes=[ApproveEntry(ref="pay1", name="pay")], actor="tina",
                     decider=treasurer("tina"), emit=gone))  # the turn fails before it pays
    source = b.app.get_chat(b.chat_id)
    assert source.status == "failed" and source.state.calls["pay1"].status == "approved"
    fork = b.app.fork(b.chat_id, source.version, actor="mallory", tenant="acme")
    [pending] = fork.pending_interrupts()
    assert fork.status == "interrupted" and pending.approval is not None
    assert (pending.decided_by, pending.approval.votes) == (None, [])
    with pytest.raises(NothingToRetryError):
        run(b.app.retry(fork.id, actor="mallory"))
    assert b.runs == []
    b.vote(fork.id, "tom")
    assert b.runs == [("pay", f"{b.chat_id}:pay1:1")]


def test_a_restart_not_yet_run_is_an_interrupt_again_in_a_fork_at_the_sources_attempt(
        bank: Any) -> None:
    b = bank(first="ask")
    run(b.app.resume(b.chat_id, actor="bob", restart=[RestartEntry(ref="pay1", name="ask")],
                     emit=gone))
    source = b.app.get_chat(b.chat_id)
    assert source.state.calls["pay1"].status == "restarted"
    fork = b.app.fork(b.chat_id, source.version, actor="mallory", tenant="acme")
    [pending] = fork.pending_interrupts()
    assert (pending.attempt, pending.decision, pending.interrupt) == (1, None, {"confirm": 500})
    run(b.app.retry(b.chat_id, actor="bob"))  # the source's restart runs: attempt 2
    run(b.app.resume(fork.id, actor="bob", restart=[RestartEntry(ref="pay1", name="ask")]))
    assert b.runs == [("ask", f"{b.chat_id}:pay1:2")] * 2


def test_a_completed_call_is_not_asked_again_and_old_fork_events_still_load(
        bank: Any) -> None:
    b = bank()
    b.vote(b.chat_id, "tina")
    fork = b.app.fork(b.chat_id, b.version(b.chat_id), actor="mallory", tenant="acme")
    copied = fork.state.calls["pay1"]
    assert (copied.status, copied.forked, fork.pending_interrupts()) == ("completed", None, [])
    _, forked = b.app.chat_events(fork.id)
    assert isinstance(forked, ChatForked)
    old = forked.model_dump(mode="json")  # a fork recorded before calls knew their source
    assert ChatForked.model_validate(old).begun() == forked.begun()
