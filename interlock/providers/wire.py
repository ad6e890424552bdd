"""Helpers both provider mappings share: tool arguments, tool outputs, system prompts."""

from __future__ import annotations

import json
from typing import Any

from interlock.domain.messages import Message, Part, ToolResponse
from interlock.domain.models import ChunkSink, ModelChunk, ToolDefinition

INVALID_JSON = "__invalid_json__"


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
