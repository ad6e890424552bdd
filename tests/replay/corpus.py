"""Recorded banking chats: the corpus replay-tests run against (tests and bench)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from uuid import UUID

from interlock.bootstrap import build_service
from interlock.domain import (
    Agent,
    ApproveEntry,
    EditEntry,
    Interlock,
    Interrupt,
    RespondEntry,
    RestartEntry,
)
from interlock.domain.chat.canonical import sha256_hex
from interlock.examples.banking import AGENTS
from interlock.stores.erasure_keys import KeyStore

Conversation = Callable[[Interlock], Awaitable[UUID]]


async def small_transfer(app: Interlock, amount: int = 500) -> UUID:
    """Approved by the user, under the limit: transferMoney runs."""
    chat = app.start_chat("bankingAgent", actor="alice", tenant="acme")
    sent = await app.send(chat.id, f"Transfer ${amount} to savings.", actor="alice")
    [ask] = sent.interrupts
    await app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})])
    return chat.id


async def large_transfer(app: Interlock) -> UUID:
    """Over the limit: the tool interrupts, the approver restarts it with an override."""
    chat = app.start_chat("bankingAgent", actor="alice", tenant="acme")
    sent = await app.send(chat.id, "Transfer $2500 to savings.", actor="alice")
    [ask] = sent.interrupts
    held = await app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})])
    [over] = held.interrupts
    await app.resume(chat.id, actor="bob", restart=[
        RestartEntry(ref=over.ref, name=over.name, resumed_metadata={"override": True})])
    return chat.id


async def declined(app: Interlock) -> UUID:
    chat = app.start_chat("bankingAgent", actor="carol", tenant="acme")
    sent = await app.send(chat.id, "Transfer $300 to checking2.", actor="carol")
    [ask] = sent.interrupts
    await app.resume(chat.id, actor="bob", respond=[RespondEntry(
        ref=ask.ref, name=ask.name, output={"approved": False, "feedback": "not today"})])
    await app.send(chat.id, "Hello?", actor="carol")
    return chat.id


async def _held_transfer(app: Interlock) -> tuple[UUID, Interrupt]:
    """A $2500 transfer the user approved, held by the over-limit policy."""
    chat = app.start_chat("treasuryBankingAgent", actor="alice", tenant="acme")
    sent = await app.send(chat.id, "Transfer $2500 to savings.", actor="alice")
    [ask] = sent.interrupts
    held = await app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})])
    return chat.id, held.interrupts[0]


async def treasury(app: Interlock) -> UUID:
    """Held by the over-limit policy until two treasury approvers say yes."""
    chat_id, transfer = await _held_transfer(app)
    for approver in ("tina", "tom"):
        await app.resume(chat_id, actor=approver,
                         votes=[ApproveEntry(ref=transfer.ref, name=transfer.name)])
    return chat_id


async def treasury_edited(app: Interlock) -> UUID:
    """Held; tina edits the amount with her reason (the console asks for one), two approve."""
    chat_id, transfer = await _held_transfer(app)
    edited = {"amount": 2400, "to_account": "savings"}
    await app.resume(chat_id, actor="tina", votes=[EditEntry(
        ref=transfer.ref, name=transfer.name, input=edited, reason="the invoice says 2,400")])
    for approver in ("tom", "tess"):
        await app.resume(chat_id, actor=approver, votes=[ApproveEntry(
            ref=transfer.ref, name=transfer.name, input_sha256=sha256_hex(edited))])
    return chat_id


async def treasury_small(app: Interlock) -> UUID:
    chat = app.start_chat("treasuryBankingAgent", actor="alice", tenant="acme")
    sent = await app.send(chat.id, "Transfer $200 to savings.", actor="alice")
    [ask] = sent.interrupts
    await app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})])
    return chat.id


CONVERSATIONS: tuple[Conversation, ...] = (
    small_transfer, large_transfer, declined, treasury, treasury_small)


def served(store: str, agents: Sequence[Agent] = AGENTS) -> Interlock:
    """The service as `interlock serve` builds it: the banking agents, personal data keyed."""
    app = build_service(store, agents)
    app.protect_personal_data(KeyStore.open(app))
    return app


async def record(app: Interlock, chats: int = len(CONVERSATIONS)) -> list[UUID]:
    """`chats` recorded conversations, the five kinds in turn."""
    return [await CONVERSATIONS[n % len(CONVERSATIONS)](app) for n in range(chats)]
