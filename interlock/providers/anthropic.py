"""Anthropic Messages through the official SDK's async client."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStreamEvent,
    TextBlock,
    TextDelta,
    ToolUseBlock,
)

from interlock.domain.chat.messages import Message, Part
from interlock.domain.runtime.models import ModelRequest, ModelResponse, Usage
from interlock.providers.anthropic_wire import from_message, to_messages, to_tools, tool_part
from interlock.providers.loops import PerLoop
from interlock.providers.retry import Fault, RetryPolicy, status_fault
from interlock.providers.sdk import SdkModel
from interlock.providers.transport import TimeoutException, TransportError
from interlock.providers.wire import ChunkTap, split_system

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_TOKENS = 4096


class AnthropicModel(SdkModel[anthropic.AsyncAnthropic]):
    """A `Model` served by the Anthropic Messages API."""

    errors = (anthropic.AnthropicError, json.JSONDecodeError)

    def __init__(
        self,
        model: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.name = f"anthropic:{model}"
        self.max_tokens = max_tokens
        self.retry = retry or RetryPolicy()
        self._clients = PerLoop(
            lambda: (
                client
                or anthropic.AsyncAnthropic(
                    api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
                )
            )
        )

    def _fault(self, exc: Exception) -> Fault:
        return describe(exc)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        system, conversation = split_system(request.messages)
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": to_messages(conversation),
        }
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = to_tools(request.tools)
        return params

    async def _complete(self, params: dict[str, Any]) -> ModelResponse:
        reply = await self.client.messages.create(**params, stream=False)
        message, usage = from_message(reply)
        return ModelResponse(message=message, usage=usage)

    async def _stream(self, params: dict[str, Any], tap: ChunkTap) -> ModelResponse:
        stream = await self.client.messages.create(**params, stream=True)
        assembler = _Assembler()
        async with stream:
            try:
                async for event in stream:
                    await tap.text(assembler.add(event))
            except TransportError as exc:  # this SDK does not wrap errors met mid-stream
                raise _wrapped(exc, stream.response.request) from exc
        return ModelResponse(message=assembler.message(), usage=assembler.usage())


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    ref: str = ""
    name: str = ""

    def part(self) -> Part | None:
        content = "".join(self.text)
        if self.kind == "tool_use":
            return tool_part(self.ref, self.name, content)
        return Part(text=content) if content else None


@dataclass
class _Assembler:
    """Builds one reply from raw stream events: text blocks and tool_use input fragments."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, event: RawMessageStreamEvent) -> str | None:
        """Take in one event; return its text delta."""
        if isinstance(event, RawMessageStartEvent):
            self._count(event.message.usage)
        elif isinstance(event, RawMessageDeltaEvent):
            self._count(event.usage)
        elif isinstance(event, RawContentBlockStartEvent):
            self._start(event)
        elif isinstance(event, RawContentBlockDeltaEvent):
            return self._delta(event)
        return None

    def _start(self, event: RawContentBlockStartEvent) -> None:
        block = event.content_block
        if isinstance(block, ToolUseBlock):
            self.blocks[event.index] = _Block("tool_use", ref=block.id, name=block.name)
        elif isinstance(block, TextBlock):
            self.blocks[event.index] = _Block("text", text=[block.text])

    def _delta(self, event: RawContentBlockDeltaEvent) -> str | None:
        block = self.blocks.get(event.index)
        delta = event.delta
        if block is None or not isinstance(delta, TextDelta | InputJSONDelta):
            return None
        piece = delta.text if isinstance(delta, TextDelta) else delta.partial_json
        block.text.append(piece)
        return piece if isinstance(delta, TextDelta) else None

    def _count(self, usage: Any) -> None:
        # message_start carries input tokens; message_delta carries the cumulative output.
        cached = (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
        self.input_tokens = max(self.input_tokens, (usage.input_tokens or 0) + cached)
        self.output_tokens = max(self.output_tokens, usage.output_tokens or 0)

    def usage(self) -> Usage:
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)

    def message(self) -> Message:
        parts = [p for _, b in sorted(self.blocks.items()) if (p := b.part()) is not None]
        return Message(role="model", content=parts)


def _wrapped(exc: TransportError, request: Any) -> anthropic.APIConnectionError:
    if isinstance(exc, TimeoutException):
        return anthropic.APITimeoutError(request=request)
    message = f"connection lost mid-stream: {exc}"
    return anthropic.APIConnectionError(message=message, request=request)


def describe(exc: Exception) -> Fault:
    """What an Anthropic SDK error means for a retry."""
    if isinstance(exc, anthropic.APITimeoutError):
        return Fault(retryable=True, reason="request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return Fault(retryable=True, reason=f"connection failed: {exc.message}")
    if isinstance(exc, anthropic.APIStatusError):
        return status_fault(exc.status_code, exc.body, exc.response.headers, exc.message)
    if isinstance(exc, json.JSONDecodeError):
        return Fault(retryable=False, reason=f"malformed reply: {exc}")
    return Fault(retryable=False, reason=f"{type(exc).__name__}: {exc}")
