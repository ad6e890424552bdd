"""The model interface the turn loop calls, and the deterministic FunctionModel."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from interlock.domain.chat.messages import Message
from interlock.domain.errors import ModelError


class ToolDefinition(BaseModel):
    """What a model is told about a tool."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0


class ModelRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    messages: list[Message]
    tools: list[ToolDefinition] = []

    @property
    def last(self) -> Message:
        return self.messages[-1]


class ModelResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    message: Message
    usage: Usage | None = None


class ModelChunk(BaseModel):
    """A piece of a streamed reply: text as it comes."""

    model_config = ConfigDict(frozen=True)

    text: str


ChunkSink = Callable[[ModelChunk], Awaitable[None]]


class Model(Protocol):
    """Anything that turns a request into a reply; raises ModelError when it cannot."""

    name: str

    async def generate(
        self, request: ModelRequest, on_chunk: ChunkSink | None = None
    ) -> ModelResponse: ...


ModelFunction = Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]


class FunctionModel:
    """A model played by a deterministic Python function (tests, demos)."""

    def __init__(self, fn: ModelFunction, name: str = "function") -> None:
        self.fn = fn
        self.name = name

    async def generate(
        self, request: ModelRequest, on_chunk: ChunkSink | None = None
    ) -> ModelResponse:
        try:
            result = self.fn(request)
            if inspect.isawaitable(result):
                result = await result
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"{self.name} failed: {exc}") from exc
        if on_chunk is not None and result.message.text:
            await on_chunk(ModelChunk(text=result.message.text))
        return result
