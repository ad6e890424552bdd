"""Helpers both provider mappings share: tool arguments, tool outputs, system prompts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from interlock.domain.chat.messages import Message, Part, ToolResponse
from interlock.domain.runtime.models import (
    ChunkSink,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    ToolDefinition,
)

INVALID_JSON = "__invalid_json__"
WRAPPED = "input"  # the one property a non-object tool input travels under


def boxed_tools(tools: list[ToolDefinition]) -> frozenset[str]:
    """Tools whose input is not a JSON object (a list, a scalar, null, a union).

    OpenAI's function `parameters` and Anthropic's `input_schema` must be object schemas, and
    a call's arguments an object; Genkit passes such a schema as it is and the provider
    refuses it. Interlock boxes the input as `{"input": value}` on the wire, the schema and
    the history alike, and unboxes the model's calls, so the tool and the history hold the
    value itself, unchanged (a list stays a list, null stays null).
    """
    return frozenset(t.name for t in tools if t.input_schema.get("type") != "object")


def to_provider(request: ModelRequest, boxed: frozenset[str]) -> ModelRequest:
    """The request with each boxed tool's schema and recorded inputs boxed."""
    if not boxed:
        return request
    tools = [t.model_copy(update={"input_schema": _boxed_schema(t.input_schema)})
             if t.name in boxed else t for t in request.tools]
    messages = [_map_inputs(m, boxed, lambda value: {WRAPPED: value}) for m in request.messages]
    return request.model_copy(update={"tools": tools, "messages": messages})


def from_provider(response: ModelResponse, boxed: frozenset[str]) -> ModelResponse:
    """The reply with each boxed tool's `{"input": value}` arguments unboxed to `value`.

    Arguments of another shape (malformed JSON, a missing `input`) are kept as they came,
    so the tool's input check fails the call and tells the model why.
    """
    if not boxed:
        return response
    message = _map_inputs(response.message, boxed, _unboxed)
    return response.model_copy(update={"message": message})


def _boxed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    boxed: dict[str, Any] = {"type": "object", "properties": {WRAPPED: inner},
                             "required": [WRAPPED], "additionalProperties": False}
    if "$defs" in schema:  # pydantic's "#/$defs/..." references resolve from the root
        boxed["$defs"] = schema["$defs"]
    return boxed


def _unboxed(value: Any) -> Any:
    if isinstance(value, dict) and list(value) == [WRAPPED]:
        return value[WRAPPED]
    return value


def _map_inputs(
    message: Message, boxed: frozenset[str], change: Callable[[Any], Any]
) -> Message:
    if not any(r.name in boxed for r in message.tool_requests):
        return message
    parts = [
        p.model_copy(update={"tool_request": p.tool_request.model_copy(
            update={"input": change(p.tool_request.input)})})
        if p.tool_request is not None and p.tool_request.name in boxed else p
        for p in message.content
    ]
    return message.model_copy(update={"content": parts})


def parse_arguments(raw: str | None) -> Any:
    """A tool call's JSON arguments; malformed text is kept under INVALID_JSON, not raised."""
    if raw is None or not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return {INVALID_JSON: raw}


def dump_json(value: Any) -> str:
    """Compact JSON text for a provider that wants a string."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def output_text(response: ToolResponse) -> str:
    """A tool's output as the text a provider expects: strings as-is, the rest as JSON."""
    output = response.output
    return output if isinstance(output, str) else dump_json(output)


def is_error(part: Part) -> bool:
    """A failed tool's part is flagged in its metadata (see domain.state.ToolCall.response_part)."""
    return part.tool_response is not None and bool((part.metadata or {}).get("failed"))


def described(tool: ToolDefinition) -> dict[str, str]:
    """The tool's description field, left out when it is empty."""
    return {"description": tool.description} if tool.description else {}


def split_system(messages: list[Message]) -> tuple[str | None, list[Message]]:
    """The system prompt (all system messages' text) and the conversation without it."""
    system = [m.text for m in messages if m.role == "system"]
    rest = [m for m in messages if m.role != "system"]
    return ("\n\n".join(system) if system else None), rest


class ChunkTap:
    """Forwards text deltas to a sink and remembers whether any went out."""

    def __init__(self, sink: ChunkSink) -> None:
        self.sink = sink
        self.used = False

    async def text(self, delta: str | None) -> None:
        if delta:
            self.used = True
            await self.sink(ModelChunk(text=delta))

    def untouched(self) -> bool:
        """True while nothing was forwarded, so a retry cannot repeat text."""
        return not self.used
