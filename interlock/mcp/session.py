"""One connection to an MCP server: a task that holds the SDK's client open until closed.

The SDK's context managers (the stdio subprocess, the HTTP client, the session's task
group) must be left by the task that entered them, so one task enters them and waits;
calls from other tasks go over the session it holds.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import ValidationError

from interlock.mcp.config import McpConfig
from interlock.mcp.errors import McpCallError
from interlock.mcp.spec import ServerSpec

# What a broken connection raises: the SDK's errors, the HTTP client's, the OS's (a dead
# pipe), anyio's streams', and a server's answer that is not MCP.
TRANSPORT_ERRORS = (MCPError, httpx2.HTTPError, OSError, anyio.BrokenResourceError,
                    anyio.ClosedResourceError, anyio.EndOfStream, ValidationError)
SESSION_HEADER = "mcp-session-id"
SSE_READ_TIMEOUT = 300.0  # the SDK's own: a server may hold an event stream open


class Session:
    """One connection: a task that entered the SDK's client and holds it until closed."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.error: BaseException | None = None
        self.refused_with: int | None = None  # the HTTP status of a refusal (the SDK drops it)
        self.gone = False  # an HTTP server answered 404 to this session: it restarted
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def open(self, spec: ServerSpec, config: McpConfig) -> Client:
        self._task = asyncio.create_task(self._hold(spec, config))
        try:
            async with asyncio.timeout(config.connect_timeout):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise McpCallError(f"cannot connect within {config.connect_timeout:g} s") from None
        if self.client is None:
            status = f" (HTTP {self.refused_with})" if self.refused_with else ""
            raise McpCallError(f"cannot connect: {describe(self.error)}{status}")
        return self.client

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    async def close(self) -> None:
        self._closing.set()
        if self._task is None:
            return
        try:
            async with asyncio.timeout(5):
                await asyncio.shield(self._task)
        except TimeoutError:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _hold(self, spec: ServerSpec, config: McpConfig) -> None:
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(spec, config, stack)
                client = await stack.enter_async_context(
                    Client(transport, cache=None, mode=config.protocol))
                self.client = client
                self._ready.set()
                await self._closing.wait()
        except* TRANSPORT_ERRORS as group:
            self.error = _leaf(group)
        finally:
            self.client = None
            self._ready.set()

    async def _transport(self, spec: ServerSpec, config: McpConfig, stack: AsyncExitStack
                         ) -> Any:
        if spec.kind == "stdio":
            argv = spec.argv
            return stdio_client(StdioServerParameters(command=argv[0], args=list(argv[1:])))
        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers=config.headers_for(spec.url),
            timeout=httpx2.Timeout(config.connect_timeout, read=SSE_READ_TIMEOUT),
            event_hooks={"response": [self._note_refusal]}))
        return streamable_http_client(spec.url, http_client=http)

    async def _note_refusal(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.refused_with = response.status_code
        if response.status_code == 404 and SESSION_HEADER in response.request.headers:
            self.gone = True  # the spec's sign of a lost session: the request did not run


def _leaf(error: BaseException) -> BaseException:
    """The first error inside (nested) task-group errors: the one worth naming."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def describe(error: BaseException | None) -> str:
    return f"{type(error).__name__}: {error}" if error is not None else "no reason given"
