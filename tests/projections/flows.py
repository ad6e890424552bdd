"""Seed flows for the read-side tests, and the views' expected rows derived from the log."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel

from interlock.bootstrap import build_service
from interlock.domain import (
    Agent,
    FunctionModel,
    Interlock,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    RespondEntry,
    RestartEntry,
    ToolContext,
    ToolRequest,
    tool,
)
from interlock.domain.chat import events as ev
from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.events import Responded, Restarted
from interlock.examples.banking import banking
from interlock.projections.interface import ChatSummary, DecisionRow, InboxRow


class DeployInput(BaseModel):
    service: str


@tool(name="deploy", description="Deploy a service after a human says yes.", side_effects=False,
      interrupts=True)
async def deploy(input: DeployInput, ctx: ToolContext) -> dict[str, Any]:
    if not (ctx.resumed or {}).get("ok"):
        ctx.interrupt({"service": input.service})
    return {"deployed": input.service}


def _ops_script(request: ModelRequest) -> ModelResponse:
    """Asks to deploy two services at once, then reports."""
    if request.messages[-1].role == "user":
        parts = [Part(tool_request=ToolRequest(name="deploy", input={"service": s}))
                 for s in ("api", "web")]
        return ModelResponse(message=Message(role="model", content=parts))
    return ModelResponse(message=Message(role="model", content=[Part(text="deployed")]))


ops = Agent(name="opsAgent", system="Deploy when asked.", tools=[deploy],
            model=FunctionModel(_ops_script, name="ops-script"))
AGENTS = [banking, ops]


def app_for(store: str) -> Interlock:
    return build_service(store, AGENTS)


def as_carried(self: Chat, message: Message, usage: dict[str, int] | None = None) -> None:
    """`Chat.record_model_reply` as it was while a reply carried its requests (commit 9181cf1,
    until ToolRequested came back): one event, `requests`, no ToolRequested. Patched in, it
    records chats in that form, as some stores hold them."""
    message = self._with_unique_refs(message)
    requests = [ev.Requested(ref=r.ref or "", name=r.name) for r in message.tool_requests]
    self._trigger(ev.ModelResponded, message=message, usage=usage, requests=requests or None)


async def banking_flows(app: Interlock) -> tuple[list[UUID], int]:
    """Approved, overridden, replaced-input and still-pending transfers; the last position."""
    chats, position = [], 0
    for text, then in (("transfer $50 to savings", None), ("transfer $5000 to bob", "override"),
                       ("transfer $3000 to carol", "replace"), ("transfer $20 to dave", "leave")):
        chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
        chats.append(chat.id)
        result = await app.send(chat.id, text, actor="alice")
        position = result.position or position
        if then == "leave":
            continue
        approve = RespondEntry(ref=result.interrupts[0].ref, name="userApproval",
                               output={"approved": True})
        result = await app.resume(chat.id, respond=[approve], actor="bob")
        position = result.position or position
        if then is not None:
            ref = result.interrupts[0].ref
            change: dict[str, Any] = (
                {"resumed_metadata": {"override": True}} if then == "override"
                else {"replace_input": {"amount": 500, "to_account": "carol"}})
            entry = RestartEntry(ref=ref, name="transferMoney", **change)
            result = await app.resume(chat.id, restart=[entry], actor="carol")
            position = result.position or position
    return chats, position


async def ops_flow(app: Interlock) -> tuple[UUID, int]:
    """Two interrupts; a partial resume; a restart that interrupts again; then the rest."""
    chat = app.start_chat("opsAgent", actor="dev", tenant="ops")
    first = await app.send(chat.id, "ship it", actor="dev")
    api, web = (i.ref for i in first.interrupts)
    await app.resume(chat.id, respond=[RespondEntry(ref=api, name="deploy", output={"ok": 1})],
                     actor="lead")
    again = await app.resume(chat.id, restart=[RestartEntry(ref=web, name="deploy")],
                             actor="lead")
    assert [i.ref for i in again.interrupts] == [web]  # a fresh interrupt on the same ref
    last = await app.resume(chat.id, restart=[
        RestartEntry(ref=web, name="deploy", resumed_metadata={"ok": True})], actor="boss")
    assert last.finish_reason == "stop"
    return chat.id, last.position or 0


async def seed(app: Interlock) -> tuple[list[UUID], int]:
    chats, _ = await banking_flows(app)
    chat, position = await ops_flow(app)
    return [*chats, chat], position


# -- what the log implies -------------------------------------------------------------------


def expected_inbox(app: Interlock, chat_ids: list[UUID]) -> list[InboxRow]:
    rows = []
    for chat_id in chat_ids:
        chat = app.get_chat(chat_id)
        for call in chat.state.calls.values():
            if call.status == "interrupted":
                assert call.interrupted_at is not None
                rows.append(InboxRow(
                    chat_id=str(chat_id), tenant=chat.state.tenant, agent=chat.state.agent,
                    ref=call.ref, tool=call.name, input=call.input, metadata=call.interrupt,
                    requested_at=call.interrupted_at, requested_by=call.requested_by,
                    approval=call.approval.model_dump(mode="json") if call.approval else None,
                    expires_at=call.approval.terms.expires_at if call.approval else None))
    return sorted(rows, key=lambda r: (r.requested_at, r.chat_id, r.ref))


def expected_decisions(app: Interlock, chat_ids: list[UUID]) -> list[DecisionRow]:
    rows = []
    for chat_id in chat_ids:
        for event in app.events.get(chat_id):
            if isinstance(event, Responded | Restarted):
                rows.append(_decision(app, chat_id, event))
    return sorted(rows, key=lambda r: (r.decided_at, r.chat_id, r.version), reverse=True)


def _decision(app: Interlock, chat_id: UUID, e: Responded | Restarted) -> DecisionRow:
    before = app.get_chat(chat_id, version=e.originator_version - 1).state
    call = before.calls[e.ref]
    assert call.interrupted_at is not None
    common = {"chat_id": str(chat_id), "tenant": before.tenant, "agent": before.agent,
              "ref": e.ref, "tool": call.name, "actor": e.actor, "input_sha256": e.input_sha256,
              "requested_at": call.interrupted_at, "decided_at": e.timestamp,
              "version": e.originator_version, "original_input": call.input,
              "fingerprint": before.fingerprint}
    if isinstance(e, Responded):
        return DecisionRow(kind="respond", output=e.output, resumed_metadata=e.metadata, **common)
    replaced = e.replace_input if e.replaced_input_sha256 is not None else None
    return DecisionRow(kind="restart", replaced_input=replaced,
                       resumed_metadata=e.resumed_metadata, **common)


def expected_chats(app: Interlock, chat_ids: list[UUID]) -> list[ChatSummary]:
    rows = []
    for chat_id in chat_ids:
        chat = app.get_chat(chat_id)
        s = chat.state
        rows.append(ChatSummary(
            chat_id=str(chat_id), tenant=s.tenant, agent=s.agent, status=s.status,
            version=chat.version, created_at=s.created_at, last_activity=s.updated_at,
            pending_count=sum(c.status == "interrupted" for c in s.calls.values())))
    return sorted(rows, key=lambda r: (r.last_activity, r.chat_id), reverse=True)
