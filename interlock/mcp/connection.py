"""A live session with one MCP server, reopened after any failure.

Every call goes over the server's one session (JSON-RPC multiplexes concurrent calls); a
lost connection or a dead server drops the session and fails the call (a read-only call
is tried once more on a fresh one), and the next call reconnects. A call past the timeout
fails alone: the session stays for the other calls it carries. So a server restart costs
one failed call, and a turn resumed days later simply connects.
On each connect the tool list is read again: a call is refused when the server's tools
changed since the agent was built (its fingerprint names the old list).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

from mcp import Client, MCPError
from mcp.types import CallToolResult
from mcp.types import Tool as McpTool
from mcp_types import (
    CONNECTION_CLOSED,
    SERVER_INFO_META_KEY,
    Implementation,
    RequestParamsMeta,
)

from interlock.domain.chat.canonical import sha256_hex
from interlock.mcp.config import McpConfig
from interlock.mcp.errors import McpCallError
from interlock.mcp.loop import block_on_mcp_loop, register_exit
from interlock.mcp.session import TRANSPORT_ERRORS, Session, describe
from interlock.mcp.spec import ServerSpec

MAX_PAGES = 100


@dataclass(frozen=True)
class Listing:
    """Who the server says it is, its tools, and a hash of that list."""

    server: str
    version: str
    tools: tuple[McpTool, ...]
    sha256: str


class Connection:
    """The session with one server, opened on first use and again after a failure."""

    def __init__(self, spec: ServerSpec, config: McpConfig) -> None:
        self.spec = spec
        self.config = config
        self._session: Session | None = None
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
            except _SessionGone:
                await self._drop(session)  # the server never ran the call: always try again
                if attempt == 2:
                    raise
            except McpCallError:
                await self._drop(session)
                if attempt == 2 or not retry:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(self, session: Session, name: str, arguments: Any,
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
            if session.gone:
                raise _SessionGone("the server no longer knows this session") from None
            if exc.code != CONNECTION_CLOSED:
                raise _Refused(exc.message) from None
            raise McpCallError("the connection to the server was lost mid-call") from None
        except TRANSPORT_ERRORS as exc:
            raise McpCallError(f"the connection failed: {describe(exc)}") from None

    async def _open(self) -> tuple[Session, Listing]:
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if self._session is not None and self._session.alive and self._listing:
                return self._session, self._listing
            session = Session()
            self._session, self._listing = session, None
            try:
                client = await session.open(self.spec, self.config)
                self._listing = await _list(client, self.config.connect_timeout)
            except McpCallError:
                await self._drop(session)
                raise
            return session, self._listing

    async def _drop(self, session: Session) -> None:
        if self._session is session:
            self._session = None
        await session.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._drop(self._session)


class _Refused(McpCallError):
    """The server answered the call with a protocol error: the connection is fine."""


class _SessionGone(McpCallError):
    """An HTTP server answered 404 to the session (it restarted): it did not run the call."""


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
        raise McpCallError(f"cannot list its tools: {describe(exc)}") from None
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
