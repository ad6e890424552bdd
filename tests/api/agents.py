"""Agents for the API tests: the banking demo plus ops, gated and flaky scripted agents."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic import BaseModel

from interlock import Stage
from interlock.domain import (
    Agent,
    Approval,
    FunctionModel,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ToolContext,
    ToolRequest,
    tool,
)
from interlock.examples.banking import AGENTS as BANKING


@dataclass
class Gate:
    """A test holds a model call or a tool here: `entered` once it waits, until `release`."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    async def hold(self) -> None:
        self.entered.set()
        await asyncio.to_thread(self.release.wait, 30)


GATES: dict[str, Gate] = {}
FLAKY_DOWN = threading.Event()


def _say(text: str) -> ModelResponse:
    return ModelResponse(message=Message(role="model", content=[Part(text=text)]))


def _ask(*requests: tuple[str, dict[str, object]]) -> ModelResponse:
    parts = [Part(tool_request=ToolRequest(name=n, input=i)) for n, i in requests]
    return ModelResponse(message=Message(role="model", content=parts))


class Service(BaseModel):
    service: str


class Deployed(BaseModel):
    status: str


class Token(BaseModel):
    token: str


@tool(name="deploy", description="Deploy a service; a second person must approve.",
      distinct_approver=True, interrupts=True)
async def deploy(input: Service, ctx: ToolContext) -> Deployed:
    if not ctx.resumed:
        ctx.interrupt({"reason": "production deploy"})
    return Deployed(status=f"{input.service} deployed")


@tool(name="confirm", description="Ask the user to confirm one step.", side_effects=False,
      interrupts=True)
async def confirm(input: Service, ctx: ToolContext) -> Deployed:
    ctx.interrupt({"reason": "confirm"})


@tool(name="hold", description="Blocks until the test releases its gate.")
async def hold(input: Token, ctx: ToolContext) -> Deployed:
    await GATES[input.token].hold()
    return Deployed(status="released")


def ops_script(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role != "user":
        return _say("ops done")
    words = last.text.split()
    if words[0] == "deploy":
        return _ask(("deploy", {"service": words[1]}))
    if words[0] == "confirm":
        return _ask(*[("confirm", {"service": w}) for w in words[1:]])
    return _say("say 'deploy X' or 'confirm X Y'")


async def gate_script(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role != "user":
        return _say("gate done")
    verb, _, token = last.text.partition(" ")
    if verb == "hold-model":
        await GATES[token].hold()
        return _say("model released")
    if verb == "hold-tool":
        return _ask(("hold", {"token": token}))
    return _say("ok")


def flaky_script(request: ModelRequest) -> ModelResponse:
    if FLAKY_DOWN.is_set():
        raise ConnectionError("model endpoint unreachable")
    return _say("back online")


class Payment(BaseModel):
    amount: int
    to: str = "acme"


PAID: list[dict[str, object]] = []


@tool(name="pay", description="Pay someone; over 100 needs two treasurers.",
      approval=Approval(when=lambda p: p.amount > 100, roles=["treasury"], quorum=2,
                        expires_in=timedelta(hours=1)))
async def pay(input: Payment, ctx: ToolContext) -> dict[str, object]:
    PAID.append({"chat": ctx.chat_id, **input.model_dump()})
    return {"paid": input.amount, "to": input.to}


def pay_script(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "tool":
        part = last.content[0].tool_response
        return _say(f"outcome: {part.output if part else None}")
    words = last.text.split()
    return _ask(("pay", {"amount": int(words[1]), "to": words[2]}))


ops = Agent(name="opsAgent", system="Deploy with approval.", tools=[deploy, confirm],
            model=FunctionModel(ops_script, name="ops-script"))
gated = Agent(name="gateAgent", system="Waits for the test.", tools=[hold],
              model=FunctionModel(gate_script, name="gate-script"))
flaky = Agent(name="flakyAgent", system="Fails while FLAKY_DOWN is set.", tools=[],
              model=FunctionModel(flaky_script, name="flaky-script"))

payer = Agent(name="payAgent", system="Pays with approval.", tools=[pay],
              model=FunctionModel(pay_script, name="pay-script"))



def over_100k(p: Payment) -> bool:
    return p.amount > 100_000


# docs/approvals.md's staged example: the team lead, then treasury, then over 100,000 the CFO;
# no voter may hold both trader and treasury (a toxic combination)
WIRE = Approval(stages=[Stage("team lead", roles=["lead"]), Stage("treasury", roles=["treasury"]),
                        Stage("CFO", roles=["cfo"], when=over_100k)],
                conflicts=[("trader", "treasury")])


@tool(name="wire", description="Wire money through three stages of approval.", approval=WIRE)
async def wire(input: Payment, ctx: ToolContext) -> dict[str, object]:
    PAID.append({"chat": ctx.chat_id, **input.model_dump()})
    return {"paid": input.amount, "to": input.to}


def wire_script(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "tool":
        part = last.content[0].tool_response
        return _say(f"outcome: {part.output if part else None}")
    words = last.text.split()
    return _ask(("wire", {"amount": int(words[1]), "to": words[2]}))


wirer = Agent(name="wireAgent", system="Wires with staged approval.", tools=[wire],
              model=FunctionModel(wire_script, name="wire-script"))

AGENTS = [*BANKING, ops, gated, flaky, payer, wirer]
