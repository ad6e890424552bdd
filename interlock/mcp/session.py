"""One connection to an MCP server: a task that holds the SDK's client open until closed.

The SDK's context managers (the stdio subprocess, the HTTP client, the session's task
group) must be left by the task that entered them, so one task enters them and waits;
calls from other tasks go over the session it holds. It tells its connection when the
server says its tool list changed (a notification, or the 2026-07-28 change stream it
subscribes to); its transports read each message within the answer cap, and an https
one checks the pinned certificate key at each handshake.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, Subscription, SubscriptionLost
from mcp_types import ToolListChangedNotification
from pydantic import ValidationError

from interlock.mcp.config import McpConfig
from interlock.mcp.errors import McpCallError
from interlock.mcp.http import http_client
from interlock.mcp.spec import ServerSpec
from interlock.mcp.stdio import bounded_stdio_client

# What a broken connection raises: the SDK's errors, the HTTP client's, the OS's (a dead
# pipe), anyio's streams', and a server's answer that is not MCP.
TRANSPORT_ERRORS = (MCPError, httpx2.HTTPError, OSError, anyio.BrokenResourceError,
                    anyio.ClosedResourceError, anyio.EndOfStream, ValidationError)
SESSION_HEADER = "mcp-session-id"
SSE_READ_TIMEOUT = 300.0  # the SDK's own: a server may hold an event stream open


class Session:
    """One connection: a task that entered the SDK's client and holds it until closed."""

    def __init__(self, on_tools_changed: Callable[[], None] = lambda: None) -> None:
        self.client: Client | None = None
        self.impostor: str | None = None  # why the server is not the pinned one
        self.unattributed_oversize = False  # a message past the cap ended the session
        self.deaf = False  # its stream of list changes ended: changes could go unheard
        self._on_tools_changed = on_tools_changed
        self.error: BaseException | None = None
        self.refused_with: int | None = None  # the HTTP status of a refusal (the SDK drops it)
        self.gone = False  # an HTTP server answered 404 to this session: it restarted
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def open(self, spec: ServerSpec, config: McpConfig, tls_key_sha256: str | None = None
                   ) -> Client:
        self._task = asyncio.create_task(self._hold(spec, config, tls_key_sha256))
        try:
            async with asyncio.timeout(config.connect_timeout):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise McpCallError(f"cannot connect within {config.connect_timeout:g} s") from None
        if self.client is None and self.impostor is not None:
            raise McpCallError(f"not the pinned server: {self.impostor}")
        if self.client is None:
            status = f" (HTTP {self.refused_with})" if self.refused_with else ""
            raise McpCallError(f"cannot connect: {describe(self.error)}{status}")
        return self.client

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and not self.deaf

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

    async def _hold(self, spec: ServerSpec, config: McpConfig, tls_key: str | None) -> None:
        watch: asyncio.Task[None] | None = None
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(spec, config, tls_key, stack)
                client = await stack.enter_async_context(
                    Client(transport, cache=None, mode=config.protocol,
                           message_handler=self._on_message))
                subscription = await self._listen(client, stack, config.connect_timeout)
                if subscription is not None:
                    watch = asyncio.create_task(self._watch(subscription))
                self.client = client
                self._ready.set()
                try:
                    await self._closing.wait()
                finally:
                    if watch is not None:
                        watch.cancel()
                        await asyncio.gather(watch, return_exceptions=True)
        except* TRANSPORT_ERRORS as group:
            self.error = _leaf(group)
        finally:
            self.client = None
            self._ready.set()

    async def _on_message(self, message: Any) -> None:
        """`notifications/tools/list_changed` (handshake-era sessions; a 2026-07-28 session
        gets it on the `subscriptions/listen` stream, teed here too)."""
        if isinstance(message, ToolListChangedNotification):
            self._on_tools_changed()

    async def _listen(self, client: Client, stack: AsyncExitStack, timeout: float
                      ) -> Subscription | None:
        """A 2026-07-28 session subscribes to tool-list changes; earlier ones get them as
        notifications without asking."""
        try:
            async with asyncio.timeout(timeout):
                return await stack.enter_async_context(client.listen(tools_list_changed=True))
        except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError):
            return None  # the server offers no stream: its notifications are all there is

    async def _watch(self, subscription: Subscription) -> None:
        """Each change event marks the list stale; when the stream ends (the server
        restarted, the connection dropped) the session is no longer trusted to hear of a
        change: the next call opens a new one, which reads the list again."""
        try:
            async for _ in subscription:
                self._on_tools_changed()
        except (SubscriptionLost, MCPError):
            pass
        if not self._closing.is_set():
            self.deaf = True

    async def _transport(self, spec: ServerSpec, config: McpConfig, tls_key: str | None,
                         stack: AsyncExitStack) -> Any:
        cap = config.max_answer_bytes
        if spec.kind == "stdio":
            argv = spec.argv
            return bounded_stdio_client(
                StdioServerParameters(command=argv[0], args=list(argv[1:])), cap,
                self._note_unattributed)
        http = await stack.enter_async_context(http_client(
            config.headers_for(spec.url), httpx2.Timeout(config.connect_timeout,
                                                         read=SSE_READ_TIMEOUT),
            cap, tls_key, self._note_refusal, self._note_impostor))
        return streamable_http_client(spec.url, http_client=http, max_sse_event_size=cap)

    def _note_unattributed(self) -> None:
        self.unattributed_oversize = True

    def _note_impostor(self, why: str) -> None:
        self.impostor = why

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
