"""Test agents: scripted models and tools that count what they did."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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
    ToolContext,
    ToolRequest,
    tool,
)
from interlock.domain.errors import ModelError

Step = ModelResponse | Callable[[ModelRequest], ModelResponse] | Exception


def say(text: str) -> ModelResponse:
    return ModelResponse(message=Message(role="model", content=[Part(text=text)]))


def call(*requests: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]) -> ModelResponse:
    """A model reply with tool requests: (name, input) or (name, input, ref)."""
    parts = [
        Part(tool_request=ToolRequest(name=r[0], input=r[1], ref=r[2] if len(r) > 2 else None))
        for r in requests
    ]
    return ModelResponse(message=Message(role="model", content=parts))


class Script:
    """Answers model calls from a list of steps; an Exception step raises ModelError."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if len(self.requests) > len(self.steps):
            return say("(script finished)")
        step = self.steps[len(self.requests) - 1]
        if isinstance(step, Exception):
            raise ModelError(str(step))
        return step(request) if callable(step) else step


class Approval(BaseModel):
    approved: bool
    note: str | None = None


class ApprovalInput(BaseModel):
    action: str


class DeployInput(BaseModel):
    env: Literal["staging", "prod"]
    version: str = "1.0"


class LookupInput(BaseModel):
    key: str


@dataclass
class Effects:
    """What the tools did, so tests can count side effects."""

    deploys: list[dict[str, Any]] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)
    contexts: list[ToolContext] = field(default_factory=list)


def make_tools(effects: Effects, *, distinct: bool = False) -> list[Any]:
    @tool(name="approve", side_effects=False, interrupts=True, distinct_approver=distinct)
    async def approve(input: ApprovalInput, ctx: ToolContext) -> Approval:
        ctx.interrupt({"action": input.action})

    @tool(name="deploy", interrupts=True)
    async def deploy(input: DeployInput, ctx: ToolContext) -> dict[str, Any]:
        effects.contexts.append(ctx)
        if input.env == "prod" and not (ctx.resumed or {}).get("ok"):
            ctx.interrupt({"needs": "ok"})
        await asyncio.sleep(0)
        effects.deploys.append(
            {"env": input.env, "version": input.version, "key": ctx.idempotency_key}
        )
        return {"deployed": input.env, "version": input.version}

    @tool(name="lookup", side_effects=False)
    async def lookup(input: LookupInput, ctx: ToolContext) -> dict[str, Any]:
        effects.lookups.append(input.key)
        return {"value": input.key.upper()}

    @tool(name="boom")
    async def boom(input: LookupInput, ctx: ToolContext) -> dict[str, Any]:
        raise RuntimeError(f"boom {input.key}")

    return [approve, deploy, lookup, boom]


def make_app(
    store: str, steps: Sequence[Step], *, max_turns: int = 5, distinct: bool = False
) -> tuple[Interlock, Script, Effects]:
    effects = Effects()
    script = Script(steps)
    agent = Agent(
        name="ops",
        system="You run deployments.",
        tools=make_tools(effects, distinct=distinct),
        model=FunctionModel(script),
        max_turns=max_turns,
    )
    return build_service(store, [agent]), script, effects


def run(coro: Any) -> Any:
    return asyncio.run(coro)
