"""A seeded history whose review answers are known: one chat per question, at set times."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.application import ProcessingEvent
from pydantic import BaseModel

from interlock import Agent, Approval, FunctionModel, ToolContext, tool
from interlock.bootstrap import build_service
from interlock.domain import (
    ApproveEntry,
    Decider,
    EditEntry,
    Interlock,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ToolRequest,
)
from interlock.domain.chat import events as ev
from interlock.domain.chat.approval_events import ApprovalVoted
from interlock.domain.chat.canonical import sha256_hex
from tests.kit import run

TENANT = "acme"
_PAY = re.compile(r"pay (\d+)")
ACTIVE = {"alice", "bob", "carol", "dave"}  # the keys file's principals; mallory was revoked


class Pay(BaseModel):
    amount: int


def _script(request: ModelRequest) -> ModelResponse:
    """Asks to pay what the last user message says; then says done."""
    last = request.messages[-1]
    if last.role == "user" and (m := _PAY.search(last.text)):
        part = Part(tool_request=ToolRequest(name="pay", input={"amount": int(m[1])}))
        return ModelResponse(message=Message(role="model", content=[part]))
    return ModelResponse(message=Message(role="model", content=[Part(text="done")]))


def agent(system: str = "Pay when asked.") -> Agent:
    @tool(name="pay", approval=Approval(roles=["treasury"], expires_in=timedelta(days=30)))
    async def pay(input: Pay, ctx: ToolContext) -> dict[str, Any]:
        return {"paid": input.amount}

    return Agent(name="payer", system=system, tools=[pay], model=FunctionModel(_script))


def monday() -> datetime:
    """Midnight UTC of a Monday at least a week ago (votes must fall before any deadline)."""
    day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(7)
    return day - timedelta(days=day.weekday())


def treasurer(name: str) -> Decider:
    return Decider(name, frozenset({"treasury"}))


@dataclass
class History:
    """The chats, and which decisions each shipped query must find."""

    app: Interlock
    store: str
    base: datetime
    monkeypatch: pytest.MonkeyPatch
    chats: dict[str, UUID] = field(default_factory=dict)

    @contextmanager
    def at(self, moment: datetime) -> Iterator[None]:
        self.monkeypatch.setattr(ev, "now", lambda: moment)
        try:
            yield
        finally:
            self.monkeypatch.undo()

    def ask(self, name: str, amount: int, when: datetime, app: Interlock | None = None) -> str:
        app = app or self.app
        if name not in self.chats:
            with self.at(when):
                self.chats[name] = app.start_chat("payer", actor="alice", tenant=TENANT).id
        with self.at(when):
            result = run(app.send(self.chats[name], f"pay {amount}", actor="alice"))
        return str(result.interrupts[0].ref)

    def vote(self, name: str, who: str, entry: Any, when: datetime,
             app: Interlock | None = None) -> None:
        app = app or self.app
        with self.at(when):
            run(app.resume(self.chats[name], votes=[entry], actor=who, decider=treasurer(who)))

    def approve(self, name: str, ref: str, who: str, when: datetime) -> None:
        self.vote(name, who, ApproveEntry(ref=ref, name="pay"), when)

    def plant_self_approval(self, name: str, ref: str) -> int:
        """alice's approval of her own request, written straight into the store (sealed, as
        whoever holds the chain's key could): the rules that refuse it never ran."""
        chat = self.app.get_chat(self.chats[name])
        vote = ApprovalVoted(originator_id=chat.id, originator_version=chat.version + 1,
                             timestamp=self.base + timedelta(days=2, hours=11), ref=ref,
                             name="pay", vote="approve", actor="alice",
                             input_sha256=sha256_hex(chat.state.calls[ref].input),
                             outcome="approved")
        sealed = vote.model_copy(update={"chain": self.app.sealer.sign(chat.state.chain_tip, vote)})
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        processing.events.append(sealed)
        self.app._record(processing)
        return vote.originator_version


def seed(store: str, monkeypatch: pytest.MonkeyPatch) -> History:
    """Mondays' decisions at 10:00-10:02 UTC unless said otherwise (inside 09-17 UTC)."""
    app = build_service(store, [agent()])
    base = monday()
    h = History(app, store, base, monkeypatch)
    ten = base + timedelta(hours=10)
    ref = h.ask("fast", 500, ten)
    h.approve("fast", ref, "bob", ten + timedelta(seconds=2))
    ref = h.ask("slow", 700, ten)
    h.approve("slow", ref, "bob", ten + timedelta(seconds=120))
    ref = h.ask("edited", 20000, ten)
    h.vote("edited", "carol", EditEntry(ref=ref, name="pay", input={"amount": 15000},
                                        reason="a smaller amount"),
           ten + timedelta(seconds=30))
    h.vote("edited", "bob", ApproveEntry(ref=ref, name="pay", input_sha256=sha256_hex(
        {"amount": 15000})), ten + timedelta(seconds=60))
    ref = h.ask("reasked", 300, ten)
    due = datetime.now(UTC) + timedelta(days=31)  # deadlines run from the real clock
    with h.at(ten + timedelta(hours=1)):
        assert run(app.expire_due(h.chats["reasked"], ref, at=due)) == "expired"
    ref = h.ask("reasked", 300, ten + timedelta(hours=2))
    h.approve("reasked", ref, "bob", ten + timedelta(hours=2, seconds=40))
    night = base + timedelta(hours=3)
    ref = h.ask("night", 100, night)
    h.approve("night", ref, "bob", night + timedelta(minutes=5))
    ref = h.ask("revoked", 400, ten)
    h.approve("revoked", ref, "mallory", ten + timedelta(seconds=50))
    ref = h.ask("fingerprint", 600, ten)
    h.approve("fingerprint", ref, "dave", ten + timedelta(seconds=45))
    changed = build_service(store, [agent("Pay when asked, politely.")])
    try:
        ref = h.ask("fingerprint", 650, ten + timedelta(hours=1), app=changed)
        h.vote("fingerprint", "dave", ApproveEntry(ref=ref, name="pay"),
               ten + timedelta(hours=1, seconds=45), app=changed)
    finally:
        changed.close()
    h.ask("self", 800, base + timedelta(days=2, hours=10))
    return h
