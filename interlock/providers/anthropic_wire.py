"""Mapping between Interlock messages and the Anthropic Messages API, both ways."""

from __future__ import annotations

from typing import Any, cast

from anthropic.types import Message as AnthropicMessage
from anthropic.types import MessageParam, TextBlock, ToolParam, ToolUseBlock

from interlock.domain.chat.messages import Message, Part, ToolRequest
from interlock.domain.runtime.models import ToolDefinition, Usage
from interlock.providers.wire import described, is_error, output_text, parse_arguments

Block = dict[str, Any]


def to_messages(messages: list[Message]) -> list[MessageParam]:
    """The conversation as Anthropic turns; tool results travel in user turns."""
    turns: list[tuple[str, list[Block]]] = []
    for message in messages:
        role = "assistant" if message.role == "model" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue  # the API refuses empty turns
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)  # roles must alternate: merge neighbours
        else:
            turns.append((role, blocks))
    return [cast(MessageParam, {"role": role, "content": blocks}) for role, blocks in turns]


def _blocks(message: Message) -> list[Block]:
    return [block for part in message.content if (block := _block(part)) is not None]


def _block(part: Part) -> Block | None:
    if part.text:
        return {"type": "text", "text": part.text}
    if part.tool_request is not None:
        return _tool_use(part.tool_request)
    if part.tool_response is not None:
        response = part.tool_response
        block: Block = {"type": "tool_result", "tool_use_id": response.ref or "",
                        "content": output_text(response)}
        if is_error(part):
            block.update(content=str(response.output["error"]), is_error=True)
        return block
    return None


def _tool_use(request: ToolRequest) -> Block:
    value = request.input
    tool_input = value if isinstance(value, dict) else {} if value is None else {"input": value}
    return {"type": "tool_use", "id": request.ref or "", "name": request.name, "input": tool_input}


def to_tools(tools: list[ToolDefinition]) -> list[ToolParam]:
    """Tool definitions with their input JSON schemas."""
    return [
        cast(ToolParam, {"name": t.name, "input_schema": t.input_schema, **described(t)})
        for t in tools
    ]


def from_message(reply: AnthropicMessage) -> tuple[Message, Usage]:
    """A Messages API reply as a model message, with its usage."""
    parts: list[Part] = []
    for block in reply.content:
        if isinstance(block, TextBlock) and block.text:
            parts.append(Part(text=block.text))
        elif isinstance(block, ToolUseBlock):
            parts.append(tool_part(block.id, block.name, block.input))
    usage = reply.usage
    tokens = usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (
        usage.cache_read_input_tokens or 0)
    return Message(role="model", content=parts), Usage(
        input_tokens=tokens, output_tokens=usage.output_tokens)


def tool_part(ref: str, name: str, tool_input: Any) -> Part:
    """A tool request part; streamed input arrives as raw JSON text and is parsed here."""
    value = parse_arguments(tool_input) if isinstance(tool_input, str) else tool_input
    return Part(tool_request=ToolRequest(ref=ref or None, name=name, input=value))
