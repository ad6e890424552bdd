"""The seed's flows through the Python client: respond, restart, partial resume; streamed too."""

from __future__ import annotations

import pytest

from interlock.client import AsyncClient, Client, StreamEvent
from tests.api.conftest import ClientFor, Live


@pytest.fixture
def alice(client_for: ClientFor) -> Client:
    return client_for("alice")


@pytest.fixture
def bob(client_for: ClientFor) -> Client:
    return client_for("bob")


def test_respond_approves_the_transfer(alice: Client, bob: Client) -> None:
    chat = alice.chat("bankingAgent")
    res = chat.send("Transfer $500 to savings.")
    assert res.finish_reason == "interrupted"
    [approval] = res.interrupts
    assert (approval.name, approval.input["action"]) == ("userApproval", "transfer")

    done = bob.open_chat(chat.id).resume(respond=[approval.respond({"approved": True})])

    assert done.finish_reason == "stop"
    assert done.text.startswith("Done. Your checking balance is now $")
    assert [m["role"] for m in done.messages] == ["tool", "model", "tool", "model"]
    assert chat.state()["status"] == "idle"


def test_restart_with_a_replaced_input(alice: Client, bob: Client) -> None:
    chat = alice.chat("bankingAgent")
    [approval] = chat.send("Transfer $1500 to savings.").interrupts
    approver = bob.open_chat(chat.id)
    over = approver.resume(respond=[approval.respond({"approved": True})])
    [limit] = over.interrupts
    assert limit.name == "transferMoney"
    assert limit.metadata == {"reason": "over_limit", "limit": 1000.0}

    smaller = {"amount": 900, "to_account": "savings"}
    done = approver.resume(restart=[limit.restart(replace_input=smaller)])

    assert done.finish_reason == "stop"
    restarted = [e for e in chat.events() if e["type"] == "Restarted"]
    assert restarted[0]["data"]["original_input"] == {"amount": 1500.0, "to_account": "savings"}
    assert restarted[0]["data"]["replace_input"] == {"amount": 900.0, "to_account": "savings"}
    assert restarted[0]["actor"] == "bob"


def test_restart_with_resumed_metadata(alice: Client, bob: Client) -> None:
    chat = alice.chat("bankingAgent")
    [approval] = chat.send("Transfer $2000 to savings.").interrupts
    approver = bob.open_chat(chat.id)
    [limit] = approver.resume(respond=[approval.respond({"approved": True})]).interrupts

    done = approver.resume(restart=[limit.restart(resumed_metadata={"override": True})])

    assert done.finish_reason == "stop"
    assert "Done." in done.text


def test_partial_resume_keeps_the_rest_pending(client_for: ClientFor) -> None:
    dana = client_for("dana")
    chat = dana.chat("opsAgent")
    res = chat.send("confirm web db")
    assert [i.input["service"] for i in res.interrupts] == ["web", "db"]
    web, db = res.interrupts

    partial = chat.resume(respond=[web.respond({"status": "ok"})])
    assert partial.finish_reason == "interrupted"
    assert [i.ref for i in partial.interrupts] == [db.ref]

    done = chat.resume(respond=[db.respond({"status": "ok"})])
    assert done.finish_reason == "stop"
    [tool_message] = [m for m in done.messages if m["role"] == "tool"]
    refs = [p["toolResponse"]["ref"] for p in tool_message["content"]]
    assert refs == [web.ref, db.ref]  # request order, whatever the decision order


def _kinds(events: list[StreamEvent]) -> list[str]:
    return [e.type for e in events]


def test_streamed_send_and_resume(alice: Client, bob: Client) -> None:
    chat = alice.chat("bankingAgent")
    sent = list(chat.stream("Transfer $500 to savings."))
    assert _kinds(sent) == ["tool_request", "interrupt", "turn_end"]
    interrupt = sent[1].interrupt
    assert interrupt is not None and interrupt.name == "userApproval"
    assert sent[-1].data["finish_reason"] == "interrupted"

    approve = interrupt.respond({"approved": True})
    resumed = list(bob.open_chat(chat.id).stream_resume(respond=[approve], idempotency_key="k"))

    # Each tool message streams whole before the model's next output, as Genkit's `tool` chunk:
    # first the one the resume rebuilt (the approval the client responded with), then the round's.
    assert _kinds(resumed) == [
        "tool_message", "tool_request", "tool_response", "tool_message", "text", "turn_end"]
    assert resumed[0].data["metadata"] == {"resumed": True}
    assert resumed[0].data["content"][0]["toolResponse"]["output"]["approved"] is True
    assert resumed[2].data["output"]["status"] == "done"
    assert resumed[-1].data["finish_reason"] == "stop"
    assert chat.state()["status"] == "idle"
    replayed = list(bob.open_chat(chat.id).stream_resume(respond=[approve], idempotency_key="k"))
    assert _kinds(replayed) == ["turn_end"] and replayed[0].data == resumed[-1].data


@pytest.mark.anyio
async def test_async_client_flow(live: Live) -> None:
    async with AsyncClient(live.url, api_key="key-dana") as client:
        chat = await client.chat("bankingAgent")
        res = await chat.send("Transfer $100 to savings.")
        events = [
            e
            async for e in chat.stream_resume(
                respond=[res.interrupts[0].respond({"approved": True})]
            )
        ]
    assert events[-1].data["finish_reason"] == "stop"
