"""OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp) via the official SDK."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import openai
from openai.types.chat import ChatCompletionChunk

from interlock.domain.chat.messages import Message
from interlock.domain.runtime.models import ModelRequest, ModelResponse, Usage
from interlock.providers.loops import PerLoop
from interlock.providers.openai_wire import (
    from_completion,
    model_message,
    to_messages,
    to_tools,
    to_usage,
)
from interlock.providers.retry import Fault, RetryPolicy, status_fault
from interlock.providers.sdk import SdkModel
from interlock.providers.wire import ChunkTap

DEFAULT_TIMEOUT = 60.0


class OpenAIModel(SdkModel[openai.AsyncOpenAI]):
    """A `Model` served by an OpenAI-compatible `/chat/completions` endpoint."""

    errors = (openai.OpenAIError, json.JSONDecodeError)

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        provider: str = "openai",
    ) -> None:
        self.model = model
        self.provider = provider
        self.name = f"{provider}:{model}"
        self.retry = retry or RetryPolicy()
        self._clients = PerLoop(
            lambda: (
                client
                or openai.AsyncOpenAI(
                    api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
                )
            )
        )

    def _fault(self, exc: Exception) -> Fault:
        return describe(exc)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": to_messages(request.messages)}
        if request.tools:
            params["tools"] = to_tools(request.tools)
        return params

    async def _complete(self, params: dict[str, Any]) -> ModelResponse:
        completion = await self.client.chat.completions.create(**params, stream=False)
        message, usage = from_completion(completion)
        return ModelResponse(message=message, usage=usage)

    async def _stream(self, params: dict[str, Any], tap: ChunkTap) -> ModelResponse:
        stream = await self.client.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True}
        )
        assembler = _Assembler()
        async with stream:
            async for chunk in stream:
                await tap.text(assembler.add(chunk))
        return ModelResponse(message=assembler.message(), usage=assembler.usage)


@dataclass
class _Call:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Assembler:
    """Builds one reply from streamed chunks: text, and tool calls from their fragments."""

    text: list[str] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    usage: Usage | None = None
    _by_index: dict[int, _Call] = field(default_factory=dict)

    def add(self, chunk: ChatCompletionChunk) -> str | None:
        """Take in one chunk; return its text delta."""
        if chunk.usage is not None:
            self.usage = to_usage(chunk.usage)
        if not chunk.choices:
            return None
        delta = chunk.choices[0].delta
        for fragment in delta.tool_calls or []:
            call = self._slot(fragment.index, fragment.id)
            if fragment.function is not None:
                call.name = fragment.function.name or call.name
                call.arguments.append(fragment.function.arguments or "")
        if delta.content:
            self.text.append(delta.content)
        return delta.content

    def _slot(self, index: int, call_id: str | None) -> _Call:
        # Some compatible servers reuse index 0 for every call; a new id means a new call.
        call = self._by_index.get(index)
        if call is None or (call_id and call.id and call_id != call.id):
            call = self._by_index[index] = _Call()
            self.calls.append(call)
        call.id = call_id or call.id
        return call

    def message(self) -> Message:
        calls = [(c.id, c.name, "".join(c.arguments)) for c in self.calls]
        return model_message("".join(self.text), calls)


def describe(exc: Exception) -> Fault:
    """What an OpenAI SDK error means for a retry."""
    if isinstance(exc, openai.APITimeoutError):
        return Fault(retryable=True, reason="request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return Fault(retryable=True, reason=f"connection failed: {exc.message}")
    if isinstance(exc, openai.APIStatusError):
        return status_fault(exc.status_code, exc.body, exc.response.headers, exc.message)
    if isinstance(exc, json.JSONDecodeError):
        return Fault(retryable=False, reason=f"malformed reply: {exc}")
    return Fault(retryable=False, reason=f"{type(exc).__name__}: {exc}")
