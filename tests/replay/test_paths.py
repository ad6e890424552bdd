"""Every kind of recorded input replays: a model failure and its retry, a restart with a
replaced input, a rejection, a withdrawal, an expiry."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from uuid import UUID

from interlock.domain import (
    Decider,
    FunctionModel,
    Interlock,
    ModelRequest,
    ModelResponse,
    RejectEntry,
    RespondEntry,
    RestartEntry,
    Usage,
)
from interlock.domain.chat.events import now
from interlock.domain.errors import ModelError
from interlock.examples.banking import AGENTS, LEDGER, banking, banking_script, treasury_banking
from interlock.replay import ReplayOptions, replay_test
from tests.replay.corpus import served


class Flaky:
    """The banking script, but the next call fails when told to."""

    fail_next = False

    def __call__(self, request: ModelRequest) -> ModelResponse:
        if self.fail_next:
            self.fail_next = False
            raise ModelError("the provider timed out")
        return banking_script(request)


def metered(request: ModelRequest) -> ModelResponse:
    """The banking script with the token counts a provider reports (the run's, not the agent's)."""
    return banking_script(request).model_copy(update={"usage": Usage(input_tokens=len(
        request.messages), output_tokens=7)})


FLAKY = Flaky()
FLAKY_AGENTS = [*AGENTS, replace(banking, name="flakyAgent",
                                 model=FunctionModel(FLAKY, name="flaky-script")),
                replace(banking, name="meteredAgent", model=FunctionModel(metered))]


async def _asked(app: Interlock, agent: str, amount: int) -> tuple[UUID, list[str]]:
    """The user approved a transfer; the refs pending after that."""
    chat = app.start_chat(agent, actor="alice")
    [ask] = (await app.send(chat.id, f"Transfer ${amount} to savings.", actor="alice")).interrupts
    held = await app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})])
    return chat.id, [i.ref for i in held.interrupts]


async def metered_transfer(app: Interlock) -> None:
    chat_id, _ = await _asked(app, "meteredAgent", 500)
    [reply, *_] = [e for e in app.chat_events(chat_id) if type(e).__name__ == "ModelResponded"]
    assert reply.usage == {"input_tokens": 2, "output_tokens": 7}  # type: ignore[attr-defined]


async def failed_then_retried(app: Interlock) -> None:
    chat = app.start_chat("flakyAgent", actor="alice")
    FLAKY.fail_next = True
    failed = await app.send(chat.id, "Transfer $500 to savings.", actor="alice")
    assert failed.finish_reason == "failed"
    [ask] = (await app.retry(chat.id, actor="alice")).interrupts
    await app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})])


async def replaced(app: Interlock) -> None:
    chat_id, [over] = await _asked(app, "bankingAgent", 2500)
    await app.resume(chat_id, actor="bob", restart=[RestartEntry(
        ref=over, name="transferMoney", replace_input={"amount": 900, "to_account": "savings"})])


async def rejected(app: Interlock) -> None:
    chat_id, [held] = await _asked(app, "treasuryBankingAgent", 2500)
    await app.resume(chat_id, actor="tina", votes=[
        RejectEntry(ref=held, name="transferMoney", reason="unknown payee")])


async def withdrawn(app: Interlock) -> None:
    chat_id, [held] = await _asked(app, "treasuryBankingAgent", 2500)
    await app.withdraw(chat_id, [held], reason="wrong account", decider=Decider.trusted("alice"))


async def expired(app: Interlock) -> None:
    chat_id, [held] = await _asked(app, "treasuryBankingAgent", 2500)
    assert await app.expire_due(chat_id, held, at=now() + timedelta(hours=2)) == "expired"


def test_every_kind_of_input_replays_identical(store: str) -> None:
    app = served(store, FLAKY_AGENTS)
    try:
        for conversation in (failed_then_retried, replaced, rejected, withdrawn, expired,
                             metered_transfer):
            asyncio.run(conversation(app))
    finally:
        app.close()
    transfers = LEDGER.transfers
    report = replay_test(store, ReplayOptions(agents=FLAKY_AGENTS))
    assert report.identical == 6, report.to_json()
    assert LEDGER.transfers == transfers
    failed_first = report.chats[0]
    assert failed_first.model_calls == 4  # the failed call, its retry, then two more


def test_a_call_no_longer_held_is_a_policy_change_even_where_it_never_ran(store: str) -> None:
    app = served(store)
    try:
        asyncio.run(rejected(app))  # held, then rejected: transferMoney never ran
    finally:
        app.close()
    unheld = [banking, replace(treasury_banking, approvals={})]
    report = replay_test(store, ReplayOptions(agents=unheld, baselines=AGENTS))
    [chat] = report.chats
    assert chat.difference is not None and chat.difference.kind == "policy_changed"
    assert chat.difference.detail == "the new policies no longer hold this call"
    assert chat.tool_runs == 1  # userApproval's; the transfer met no recording, nor ran
