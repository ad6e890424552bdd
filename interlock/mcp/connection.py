"""A live session with one MCP server, reopened after any failure.

Every call goes over the server's one session (JSON-RPC multiplexes concurrent calls); a
lost connection, a dead server or a call past the timeout drops the session and fails the
call (a read-only call is tried once more on a fresh one), and the next call reconnects.
So a server restart costs one failed call, and a turn resumed days later simply connects.
On each connect the tool list is read again: a call is refused when the server's tools
changed since the agent was built (its fingerprint names the old list).
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult
from mcp.types import Tool as McpTool
from mcp_types import CONNECTION_CLOSED, SERVER_INFO_META_KEY, Implementation, RequestParamsMeta
from pydantic import ValidationError

from interlock.domain.chat.canonical import sha256_hex
from interlock.mcp.config import McpConfig
from interlock.mcp.errors import McpCallError
from interlock.mcp.loop import block_on_mcp_loop, register_exit
from interlock.mcp.spec import ServerSpec

# What a broken connection raises: the SDK's errors, the HTTP client's, the OS's (a dead
# pipe), anyio's streams', and a server's answer that is not MCP.
TRANSPORT_ERRORS = (MCPError, httpx2.HTTPError, OSError, anyio.BrokenResourceError,
                    anyio.ClosedResourceError, anyio.EndOfStream, ValidationError)
MAX_PAGES = 100


@dataclass(frozen=True)
class Listing:
    """Who the server says it is, its tools, and a hash of that list."""

    server: str
    version: str
    tools: tuple[McpTool, ...]
    sha256: str


class _Session:
    """One connection: a task that entered the SDK's client and holds it until closed."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.error: BaseException | None = None
        self.refused_with: int | None = None  # the HTTP status of a refusal (the SDK drops it)
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
            raise McpCallError(f"cannot connect: {_describe(self.error)}{status}")
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
                client = await stack.enter_async_context(Client(transport, cache=None))
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
        http = await stack.enter_async_context(
            create_mcp_http_client(headers=config.headers_for(spec.url)))
        http.event_hooks = {"response": [self._note_refusal]}
        return streamable_http_client(spec.url, http_client=http)

    async def _note_refusal(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.refused_with = response.status_code


def _leaf(error: BaseException) -> BaseException:
    """The first error inside (nested) task-group errors: the one worth naming."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _describe(error: BaseException | None) -> str:
    return f"{type(error).__name__}: {error}" if error is not None else "no reason given"


class Connection:
    """The session with one server, opened on first use and again after a failure."""

    def __init__(self, spec: ServerSpec, config: McpConfig) -> None:
        self.spec = spec
        self.config = config
        self._session: _Session | None = None
        self._listing: Listing | None = None
        self._lock: asyncio.Lock | None = None

    async def listing(self) -> Listing:
        """The server's identity and tools, read now (on a fresh connection if need be)."""
        for attempt in (1, 2):
            session, _ = await self._open()
            client = session.client
            try:
                if client is None:
                    raise McpCallError("the connection closed")
                self._listing = await _list(client, self.config.connect_timeout)
                return self._listing
            except McpCallError:
                await self._drop(session)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def call(self, name: str, arguments: Any, meta: RequestParamsMeta, *,
                   tools_sha256: str, retry: bool) -> CallToolResult:
        """Call a tool; a lost connection is retried once on a fresh one when `retry`."""
        for attempt in (1, 2):
            session, listing = await self._open()
            if listing.sha256 != tools_sha256:
                raise McpCallError(
                    f"{listing.server} {listing.version} now lists other tools than when "
                    "this agent was built: reload the agent (its fingerprint names the old list)")
            try:
                return await self._call(session, name, arguments, meta)
            except (_Refused, _TimedOut):
                raise  # the connection is fine: the server refused, or is slow (a retry would
                # only double the wait; the session stays for the other calls it carries)
            except McpCallError:
                await self._drop(session)
                if attempt == 2 or not retry:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(self, session: _Session, name: str, arguments: Any,
                    meta: RequestParamsMeta) -> CallToolResult:
        client = session.client
        if client is None:
            raise McpCallError("the connection closed")
        timeout = self.config.timeout
        try:
            async with asyncio.timeout(timeout):
                return await client.call_tool(name, arguments, meta=meta)
        except TimeoutError:
            raise _TimedOut(f"no answer from the server within {timeout:g} s") from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise _Refused(exc.message) from None
            raise McpCallError("the connection to the server was lost mid-call") from None
        except TRANSPORT_ERRORS as exc:
            raise McpCallError(f"the connection failed: {_describe(exc)}") from None

    async def _open(self) -> tuple[_Session, Listing]:
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if self._session is not None and self._session.alive and self._listing:
                return self._session, self._listing
            session = _Session()
            self._session, self._listing = session, None
            try:
                client = await session.open(self.spec, self.config)
                self._listing = await _list(client, self.config.connect_timeout)
            except McpCallError:
                await self._drop(session)
                raise
            return session, self._listing

    async def _drop(self, session: _Session) -> None:
        if self._session is session:
            self._session = None
        await session.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._drop(self._session)


class _Refused(McpCallError):
    """The server answered the call with a protocol error: the connection is fine."""


class _TimedOut(McpCallError):
    """The server did not answer in time (the SDK tells it the call is cancelled)."""


async def _list(client: Client, timeout: float) -> Listing:
    tools: list[McpTool] = []
    cursor: str | None = None
    stamped: Any = None
    try:
        async with asyncio.timeout(timeout):
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                stamped = stamped or (page.meta or {}).get(SERVER_INFO_META_KEY)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
    except TimeoutError:
        raise McpCallError(f"no tool list within {timeout:g} s") from None
    except TRANSPORT_ERRORS as exc:
        raise McpCallError(f"cannot list its tools: {_describe(exc)}") from None
    # Who answered this listing: a stateless HTTP session may outlive a server's restart,
    # so the identity its answers carry wins over the one from connecting.
    info = Implementation.model_validate(stamped) if stamped else client.server_info
    dumped = sorted((t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools),
                    key=lambda t: str(t["name"]))
    return Listing(server=info.name if info else "unnamed", version=info.version if info else "",
                   tools=tuple(tools), sha256=sha256_hex(dumped))


_connections: dict[tuple[ServerSpec, str], Connection] = {}
_registry_lock = threading.Lock()


def connection_for(spec: ServerSpec, config: McpConfig) -> Connection:
    """The process's one connection to this server with these settings."""
    key = (spec, sha256_hex({"headers": config.headers_for(spec.url), "t": config.timeout,
                             "connect": config.connect_timeout}))
    with _registry_lock:
        if key not in _connections:
            _connections[key] = Connection(spec, config)
        return _connections[key]


async def _close_all() -> None:
    with _registry_lock:
        connections = list(_connections.values())
    await asyncio.gather(*(c.close() for c in connections))


def close_mcp(timeout: float = 30.0) -> None:
    """Close every MCP connection of the process (stdio servers exit); calls reconnect."""
    block_on_mcp_loop(_close_all(), timeout)


register_exit(_close_all)
