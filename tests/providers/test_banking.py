"""The banking agent on each provider: interrupt, resume, and what went over the wire."""

from __future__ import annotations

import json

import pytest

from interlock.domain import RespondEntry
from interlock.domain.chat.events import ModelResponded
from interlock.examples.banking import LEDGER, TransferInput, UserApprovalInput, banking
from tests.providers.conftest import Wire
from tests.providers.fakes import Call, Reply
from tests.providers.helpers import Collected, events_of

pytestmark = pytest.mark.anyio

APPROVAL_INPUT = {"action": "transfer", "details": "Transfer $50 to savings"}
APPROVAL = Call("call_approval", "userApproval", json.dumps(APPROVAL_INPUT))
TRANSFER = Call("call_transfer", "transferMoney", '{"amount": 50, "to_account": "savings"}')
ASKING = "I need your approval before moving money."
DONE = "Done. Your checking balance is now $4,950.00."


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_banking_cycle_interrupts_and_resumes(wire: Wire, stream: bool) -> None:
    app, seen = wire.app(), Collected()
    chat = app.start_chat(banking.name, actor="alice")
    emit = seen if stream else None
    before = LEDGER.transfers
    wire.fake.queue(Reply(text=ASKING, calls=(APPROVAL,)))

    paused = await app.send(chat.id, "Please transfer $50 to savings", actor="alice", emit=emit)

    assert paused.finish_reason == "interrupted"
    assert [(i.ref, i.name, i.input) for i in paused.interrupts] == [
        ("call_approval", "userApproval", APPROVAL_INPUT)]
    assert wire.fake.system() == banking.system
    assert wire.fake.user_texts() == ["Please transfer $50 to savings"]
    assert wire.fake.tool_schemas() == {"userApproval": UserApprovalInput.model_json_schema(),
                                        "transferMoney": TransferInput.model_json_schema()}

    wire.fake.queue(Reply(calls=(TRANSFER,)), Reply(text=DONE))
    done = await app.resume(chat.id, respond=[RespondEntry(
        ref="call_approval", name="userApproval", output={"approved": True})],
        actor="bob", emit=emit)

    assert (done.finish_reason, done.text) == ("stop", DONE)
    assert LEDGER.transfers == before + 1
    assert wire.fake.tool_calls() == [
        ("call_approval", "userApproval", APPROVAL_INPUT),
        ("call_transfer", "transferMoney", {"amount": 50, "to_account": "savings"})]
    results = dict(wire.fake.tool_results())
    assert list(results) == ["call_approval", "call_transfer"]
    assert json.loads(results["call_approval"]) == {"approved": True, "feedback": None}
    assert json.loads(results["call_transfer"])["status"] == "done"
    assert [bool(r.body.get("stream")) for r in wire.fake.requests] == [stream] * 3
    usages = [e.usage for e in events_of(app, chat.id, ModelResponded)]
    assert usages == [{"input_tokens": 21, "output_tokens": 8}] * 3


async def test_streaming_forwards_text_deltas_and_whole_tool_requests(wire: Wire) -> None:
    app, seen = wire.app(), Collected()
    chat = app.start_chat(banking.name, actor="alice")
    wire.fake.queue(Reply(text=ASKING, calls=(APPROVAL,)))

    await app.send(chat.id, "Please transfer $50 to savings", actor="alice", emit=seen)

    assert len(seen.of("text")) > 1  # delivered in pieces, not at the end
    assert seen.text() == ASKING
    assert seen.of("tool_request") == [
        {"ref": "call_approval", "name": "userApproval", "input": APPROVAL_INPUT}]
    assert [d["ref"] for d in seen.of("interrupt")] == ["call_approval"]
    assert seen.of("turn_end")[0]["finish_reason"] == "interrupted"
