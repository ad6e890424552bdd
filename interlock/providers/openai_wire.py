"""Mapping between Interlock messages and OpenAI chat completions, both ways."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)

from interlock.domain.chat.messages import Message, Part, ToolRequest
from interlock.domain.runtime.models import ToolDefinition, Usage
from interlock.providers.wire import described, dump_json, output_text, parse_arguments


def to_messages(messages: list[Message]) -> list[ChatCompletionMessageParam]:
    """Interlock history as chat completion messages (one per tool response)."""
    out: list[ChatCompletionMessageParam] = []
    for message in messages:
        out.extend(_message(message))
    return out


def _message(message: Message) -> list[ChatCompletionMessageParam]:
    if message.role == "system":
        return [{"role": "system", "content": message.text}]
    if message.role == "user":
        return [{"role": "user", "content": message.text}]
    if message.role == "model":
        return [_assistant(message)]
    return [
        {"role": "tool", "tool_call_id": r.ref or "", "content": output_text(r)}
        for r in (p.tool_response for p in message.content)
        if r is not None
    ]


def _assistant(message: Message) -> ChatCompletionMessageParam:
    calls = [
        {"id": r.ref or "", "type": "function",
         "function": {"name": r.name, "arguments": dump_json({} if r.input is None else r.input)}}
        for r in message.tool_requests
    ]
    out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if calls:
        out["tool_calls"] = calls
    return cast(ChatCompletionMessageParam, out)


def to_tools(tools: list[ToolDefinition]) -> list[ChatCompletionToolParam]:
    """Tool definitions as OpenAI function tools; the parameters are the input JSON schema."""
    return [
        cast(ChatCompletionToolParam, {"type": "function", "function": {
            "name": t.name, "parameters": t.input_schema, **described(t)}})
        for t in tools
    ]


def from_completion(completion: ChatCompletion) -> tuple[Message, Usage | None]:
    """The first choice of a completion as a model message, with its usage."""
    if not completion.choices:
        return Message(role="model", content=[]), to_usage(completion.usage)
    reply = completion.choices[0].message
    calls = [
        (c.id, c.function.name, c.function.arguments)
        for c in reply.tool_calls or []
        if c.type == "function"
    ]
    return model_message(reply.content or "", calls), to_usage(completion.usage)


def model_message(text: str, calls: Sequence[tuple[str | None, str, str | None]]) -> Message:
    """A model message from text and (call id, tool name, raw JSON arguments) triples."""
    parts = [Part(text=text)] if text else []
    parts += [
        Part(tool_request=ToolRequest(ref=ref or None, name=name, input=parse_arguments(args)))
        for ref, name, args in calls
    ]
    return Message(role="model", content=parts)


def to_usage(usage: CompletionUsage | None) -> Usage | None:
    """Prompt and completion tokens as Interlock usage."""
    if usage is None:
        return None
    return Usage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens)
