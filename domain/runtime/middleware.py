"""Tool middleware: code that wraps every tool call of an agent.

Genkit's `GenerateMiddlewareDef.tool` (js/ai/src/generate/middleware.ts, run by
`resolveToolRequest` in js/ai/src/generate/resolve-tool-requests.ts) and Go's
`Hooks.WrapTool` (go/ai/middleware.go, composed by `buildToolRunner` in go/ai/generate.go):
a middleware gets the call and `next`; it may change the call before `next`, answer without
calling `next` at all, and see or replace what `next` returns or raises. The first middleware
of `Agent(tool_middleware=[...])` is the outermost, as in both.

    async def audit(call: ToolInvocation, next: ToolNext) -> Any:
        started = time.monotonic()
        try:
            return await next(call.with_input(normalise(call.input)))
        finally:
            log(call.name, time.monotonic() - started)

A middleware sees the input as JSON, as the model sent it (Genkit: the `ToolRequestPart`); the
tool's input schema is checked after it, so a changed input is checked too. `next` answers
the tool's output as JSON, checked against its output schema; whatever the chain answers in
the end is checked again. An exception that escapes the chain fails the call (the model is
told), `ctx.interrupt` pauses it, as for the tool itself. A held call (an `Approval`) is
decided before any of this runs: middleware only wraps calls that run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from interlock.domain.runtime.tools import SchemaError, Tool, ToolContext


@dataclass(frozen=True)
class ToolInvocation:
    """One tool call as middleware sees it: the tool, its JSON input and its context."""

    tool: Tool
    input: Any
    ctx: ToolContext

    @property
    def name(self) -> str:
        return self.tool.name

    def with_input(self, input: Any) -> ToolInvocation:
        """The same call with another input (checked against the tool's schema when it runs)."""
        return replace(self, input=input)


ToolNext = Callable[[ToolInvocation], Awaitable[Any]]
ToolMiddleware = Callable[[ToolInvocation, ToolNext], Awaitable[Any]]


class ToolInputError(SchemaError):
    """The input that reached the tool fails its input schema."""


class ToolOutputError(SchemaError):
    """What the tool (or a middleware) answered fails the tool's output schema."""


async def run_tool(invocation: ToolInvocation) -> Any:
    """The innermost step: check the input, run the tool, check its output (as JSON)."""
    tool = invocation.tool
    try:
        args = tool.validate_input(invocation.input)
    except SchemaError as exc:
        raise ToolInputError(exc.errors) from None
    raw = await tool(args, invocation.ctx)
    return checked_output(tool, raw)


def checked_output(tool: Tool, raw: Any) -> Any:
    try:
        return tool.validate_output(raw)
    except SchemaError as exc:
        raise ToolOutputError(exc.errors) from None


async def call_through(
    middleware: Sequence[ToolMiddleware], invocation: ToolInvocation
) -> Any:
    """Run the call through every middleware (the first outermost), then the tool."""
    if not middleware:
        return await run_tool(invocation)
    chain: ToolNext = run_tool
    for layer in reversed(middleware):
        chain = _layered(layer, chain)
    answer = await chain(invocation)
    return checked_output(invocation.tool, answer)  # a middleware may have answered itself


def _layered(layer: ToolMiddleware, next_step: ToolNext) -> ToolNext:
    async def step(invocation: ToolInvocation) -> Any:
        return await layer(invocation, next_step)

    return step
