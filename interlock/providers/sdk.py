"""What every SDK-backed model shares: one client per event loop, retries, two paths."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from interlock.domain.runtime.models import ChunkSink, ModelRequest, ModelResponse
from interlock.providers.loops import PerLoop
from interlock.providers.retry import Fault, RetryPolicy, always, call_with_retries
from interlock.providers.wire import ChunkTap, boxed_tools, from_provider, to_provider


class Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class SdkModel(ABC, Generic[C]):
    """A `Model` over a provider SDK; subclasses map requests and replies."""

    errors: ClassVar[tuple[type[Exception], ...]]
    name: str
    retry: RetryPolicy
    _clients: PerLoop[C]

    @abstractmethod
    def _fault(self, exc: Exception) -> Fault:
        """Classify an SDK error: retry it or give up, and why."""

    async def generate(
        self, request: ModelRequest, on_chunk: ChunkSink | None = None
    ) -> ModelResponse:
        boxed = boxed_tools(request.tools)
        params = self._params(to_provider(request, boxed))
        if on_chunk is None:
            return from_provider(await self._retrying(lambda: self._complete(params)), boxed)
        tap = ChunkTap(on_chunk)
        reply = await self._retrying(lambda: self._stream(params, tap), tap.untouched)
        return from_provider(reply, boxed)

    @property
    def client(self) -> C:
        """The SDK client of the running event loop."""
        return self._clients.get()

    async def aclose(self) -> None:
        """Close the running loop's SDK client and its connections."""
        client = self._clients.pop()
        if client is not None:
            await client.close()

    async def _retrying(
        self, call: Callable[[], Awaitable[ModelResponse]], may_retry: Callable[[], bool] = always
    ) -> ModelResponse:
        return await call_with_retries(
            call,
            policy=self.retry,
            errors=self.errors,
            describe=self._fault,
            provider=self.name,
            may_retry=may_retry,
        )

    @abstractmethod
    def _params(self, request: ModelRequest) -> dict[str, Any]: ...

    @abstractmethod
    async def _complete(self, params: dict[str, Any]) -> ModelResponse: ...

    @abstractmethod
    async def _stream(self, params: dict[str, Any], tap: ChunkTap) -> ModelResponse: ...
