"""A scripted agent whose one tool has a side effect, counted per idempotency key."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from pydantic import BaseModel

from interlock.domain import (
    Agent,
    FunctionModel,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ToolContext,
    ToolRequest,
    tool,
)

RUNS: Counter[str] = Counter()  # side effects by idempotency key
_RUNS_LOCK = threading.Lock()
MODEL_SECONDS = 0.02  # a turn waits on its model this long, twice: outages meet turns there


class Payment(BaseModel):
    amount: int


class Paid(BaseModel):
    paid: int


@tool(name="pay", description="Pays; a side effect outside the store.")
async def pay(input: Payment, ctx: ToolContext) -> Paid:
    with _RUNS_LOCK:
        RUNS[ctx.idempotency_key] += 1
    return Paid(paid=input.amount)


async def _model(request: ModelRequest) -> ModelResponse:
    await asyncio.sleep(MODEL_SECONDS)
    last = request.messages[-1]
    if last.role == "tool":
        return ModelResponse(message=Message(role="model", content=[Part(text="paid")]))
    ask = Part(tool_request=ToolRequest(name="pay", input={"amount": 5}))
    return ModelResponse(message=Message(role="model", content=[ask]))


AGENTS = [Agent(name="payer", system="Pay.", tools=[pay], model=FunctionModel(_model))]
