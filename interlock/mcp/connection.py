"""A live session with one MCP server, reopened after any failure, held to its pin.

Every call goes over the server's one session (JSON-RPC multiplexes concurrent calls); a
lost connection or a dead server drops the session and fails the call, never retried (a
server's read-only claim is no proof a call did not act), and the next call reconnects. A
call past the timeout fails alone: the session stays for the other calls it carries.
An HTTP server that answers 404 to the session (it restarted and forgot it) did not run
the call: that one is tried once on a new session.

What the server is (pinned: its files' hashes, its TLS key) is checked before each connect;
its tool list is read on each connect and again on `notifications/tools/list_changed`.
A call is refused once the connection has seen a list other than the one its tools were
built from: the operator accepts the new list (`interlock mcp accept`) and reloads the
agent, and nobody approves a call against one list and runs it against another.
"""

from __future__ import annotations

import asyncio
import logging
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
from interlock.mcp.errors import McpCallError, McpConfigurationError, McpRefusedError
from interlock.mcp.http import TOO_LARGE_MARK
from interlock.mcp.loop import block_on_mcp_loop, register_exit
from interlock.mcp.pins import (
    Identity,
    Pin,
    identity_of,
    load_pins,
    now_text,
    save_pin,
    tls_key_of,
    tools_sha256,
)
from interlock.mcp.session import TRANSPORT_ERRORS, Session, describe
from interlock.mcp.spec import ServerSpec
from interlock.mcp.stdio import ANSWER_TOO_LARGE, too_large

MAX_PAGES = 100
log = logging.getLogger("interlock.mcp")


@dataclass(frozen=True)
class Listing:
    """Who the server says it is, its tools, and a hash of that list."""

    server: str
    version: str
    tools: tuple[McpTool, ...]
    sha256: str

    def dumped(self) -> list[dict[str, Any]]:
        return [_dump(t) for t in self.tools]


class Connection:
    """The session with one server, opened on first use and again after a failure."""

    def __init__(self, spec: ServerSpec, config: McpConfig) -> None:
        self.spec = spec
        self.config = config
        self.pin: Pin | None = None  # the latest the agents were built with
        self._session: Session | None = None
        self._listing: Listing | None = None
        self._stale = False  # the server said its list changed: read it before a call
        self._built: set[str] = set()  # the tool lists tools were built from
        self._contradicted: set[str] = set()  # ... that this connection has since seen changed
        self._lock: asyncio.Lock | None = None
        self._refreshing: set[asyncio.Task[None]] = set()

    def built_from(self, sha256: str) -> None:
        """Tools were built from this list: their calls run only while the server serves it."""
        self._built.add(sha256)
        if self._listing is not None and self._listing.sha256 != sha256:
            self._contradicted.add(sha256)

    def refuses(self, tools_sha256: str) -> bool:
        """Whether calls of tools built from this list are refused (the server changed it)."""
        return tools_sha256 in self._contradicted

    async def listing(self) -> Listing:
        """The server's identity and tools, read now (on a fresh connection if need be)."""
        for attempt in (1, 2):
            session, _ = await self._open()
            client = session.client
            try:
                if client is None:
                    raise McpCallError("the connection closed")
                self._saw(await _list(client, self.config.connect_timeout))
                assert self._listing is not None
                return self._listing
            except McpCallError:
                await self._drop(session)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def call(self, name: str, arguments: Any, meta: RequestParamsMeta, *,
                   tools_sha256: str) -> CallToolResult:
        """Call a tool of the list `tools_sha256`; refused once the server changed it."""
        for attempt in (1, 2):
            session, listing = await self._open()
            if tools_sha256 in self._contradicted or listing.sha256 != tools_sha256:
                raise McpRefusedError(self._changed(listing))
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
                await self._drop(session)  # lost mid-call: it may have acted; never retried
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _changed(self, listing: Listing) -> str:
        if self.pin is None:
            return (f"{listing.server} {listing.version} now lists other tools than when "
                    "this agent was built: reload the agent (its fingerprint names the old list)")
        return (f"MCP server {self.spec.text!r} serves another tool list than the one an "
                f"operator pinned (SHA-256 {listing.sha256[:16]}…, pinned "
                f"{self.pin.tools_sha256[:16]}…): every call to it is refused until an "
                f"operator reviews and accepts the new list (interlock mcp accept) and the "
                "agent is reloaded")

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
            if (exc.code == ANSWER_TOO_LARGE or TOO_LARGE_MARK in exc.message
                    or "byte limit" in exc.message):
                raise _Refused(too_large(self.config.max_answer_bytes)) from None
            if session.unattributed_oversize:
                raise McpCallError(too_large(self.config.max_answer_bytes)
                                   + "; the session was closed") from None
            if session.impostor is not None:
                raise McpRefusedError(f"not the pinned server: {session.impostor}") from None
            if exc.code != CONNECTION_CLOSED:
                raise _Refused(exc.message) from None
            raise McpCallError("the connection to the server was lost mid-call") from None
        except TRANSPORT_ERRORS as exc:
            raise McpCallError(f"the connection failed: {describe(exc)}") from None

    async def _open(self) -> tuple[Session, Listing]:
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            session = self._session
            if session is not None and session.alive and self._listing:
                if self._stale and session.client is not None:
                    self._stale = False
                    try:
                        self._saw(await _list(session.client, self.config.connect_timeout))
                    except McpCallError:
                        await self._drop(session)
                        raise
                assert self._listing is not None
                return session, self._listing
            if session is not None:
                await self._drop(session)  # dead, or deaf to list changes
            await self._check_identity()
            session = Session(on_tools_changed=self._tools_changed)
            self._session, self._listing, self._stale = session, None, False
            try:
                client = await session.open(self.spec, self.config, self._tls_key())
                self._saw(await _list(client, self.config.connect_timeout))
            except McpCallError:
                await self._drop(session)
                raise
            assert self._listing is not None
            return session, self._listing

    async def _check_identity(self) -> None:
        """A stdio server's files are hashed before it is started: not the pinned ones,
        it is not started at all (a TLS key is checked by each handshake)."""
        if self.pin is None or self.spec.kind != "stdio":
            return
        found = await asyncio.to_thread(identity_of, self.spec)
        why = found.differs_from(self.pin.identity)
        if why is not None:
            log.warning("MCP server %r is not the pinned one: %s", self.spec.text, why)
            raise McpRefusedError(f"not the pinned server: {why}")

    def _tls_key(self) -> str | None:
        return self.pin.identity.tls_key_sha256 if self.pin is not None else None

    def _tools_changed(self) -> None:
        """The server says its tool list changed: read it before the next call, and now."""
        self._stale = True
        task = asyncio.get_running_loop().create_task(self._refresh())
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def _refresh(self) -> None:
        try:
            await self._open()
        except McpCallError as exc:
            log.info("MCP server %r: its changed tool list could not be read: %s",
                     self.spec.text, exc)

    def _saw(self, listing: Listing) -> None:
        before = set(self._contradicted)
        self._listing = listing
        self._contradicted |= {s for s in self._built if s != listing.sha256}
        if self._contradicted - before:
            log.warning("MCP server %r changed its tool list (SHA-256 %s): its calls are "
                        "refused until an operator accepts it and the agent is reloaded",
                        self.spec.text, listing.sha256)

    async def _drop(self, session: Session) -> None:
        if self._session is session:
            self._session = None
        await session.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._drop(self._session)


async def survey(spec: ServerSpec, config: McpConfig) -> tuple[Identity, Listing]:
    """What a server is and serves, read now on a session of its own (to pin it)."""
    tls_key = await asyncio.to_thread(tls_key_of, spec.url, config.connect_timeout
                                      ) if spec.kind == "http" else None
    identity = await asyncio.to_thread(identity_of, spec, tls_key)
    session = Session()
    try:
        client = await session.open(spec, config, tls_key)
        return identity, await _list(client, config.connect_timeout)
    finally:
        await session.close()


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
    return Listing(server=info.name if info else "unnamed", version=info.version if info else "",
                   tools=tuple(tools), sha256=tools_sha256([_dump(t) for t in tools]))


def _dump(tool: McpTool) -> dict[str, Any]:
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True)


_connections: dict[tuple[ServerSpec, str], Connection] = {}
_registry_lock = threading.Lock()


def connection_for(spec: ServerSpec, config: McpConfig) -> Connection:
    """The process's one connection to this server with these settings."""
    key = (spec, sha256_hex({"headers": config.headers_for(spec.url), "t": config.timeout,
                             "connect": config.connect_timeout, "protocol": config.protocol,
                             "cap": config.max_answer_bytes}))
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


def pin_server(text: str, config: McpConfig, *, accept: bool = False,
               timeout: float | None = None) -> tuple[Pin, Pin | None]:
    """Pin what the server `text` is and lists now into `config.pins`: a new pin, or with
    `accept` one that replaces the pin it had. The new pin and the one it replaced."""
    spec = ServerSpec.parse(text)
    old = load_pins(config.pins).get(text)
    if old is not None and not accept:
        raise McpConfigurationError(
            f"MCP server {text!r} is pinned already: review what it serves now and accept it "
            "(interlock mcp accept)")
    if old is None and accept:
        raise McpConfigurationError(f"MCP server {text!r} is not pinned (interlock mcp pin)")
    try:
        identity, listing = block_on_mcp_loop(survey(spec, config),
                                              timeout or 2 * config.connect_timeout + 5)
    except (McpCallError, TimeoutError) as exc:
        raise McpConfigurationError(f"MCP server {text!r}: {exc or 'no answer'}") from None
    pin = Pin(text, identity, listing.server, listing.version, tuple(listing.dumped()),
              listing.sha256, now_text())
    save_pin(config.pins, pin)
    return pin, old


def pin_changes(old: Pin | None, new: Pin) -> list[str]:
    """What an accepted pin changes, one line each, for the operator to read."""
    if old is None:
        return [f"pinned {new.server} {new.version}: {len(new.tools)} tools"]
    lines = []
    why = new.identity.differs_from(old.identity)
    if why is not None:
        lines.append(f"identity: {why.replace('the pin says', 'it was')}")
    before = {str(t["name"]): t for t in old.tools}
    after = {str(t["name"]): t for t in new.tools}
    lines += [f"added tool {n}" for n in sorted(after.keys() - before.keys())]
    lines += [f"removed tool {n}" for n in sorted(before.keys() - after.keys())]
    for name in sorted(before.keys() & after.keys()):
        changed = [k for k in sorted(before[name].keys() | after[name].keys())
                   if before[name].get(k) != after[name].get(k)]
        if changed:
            lines.append(f"changed tool {name}: {', '.join(changed)}")
    return lines or ["no change"]
