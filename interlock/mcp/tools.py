"""An MCP server's tools as Interlock tools: its schemas, annotations and identity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from mcp.types import CallToolResult
from mcp.types import Tool as McpTool
from mcp_types import RequestParamsMeta

from interlock.domain.chat.policies import Approval
from interlock.domain.runtime.tools import Tool, ToolContext, ToolFunction
from interlock.mcp.config import McpConfig
from interlock.mcp.connection import Connection, Listing, connection_for, log
from interlock.mcp.errors import McpCallError, McpConfigurationError
from interlock.mcp.loop import block_on_mcp_loop, on_mcp_loop
from interlock.mcp.pins import Pin, load_pins, tools_sha256
from interlock.mcp.schema import json_schema_type
from interlock.mcp.spec import ServerSpec

REQUIRE_APPROVAL = Approval()  # the default for a tool that may change the world: an approver
IDEMPOTENCY_META = "interlock/idempotencyKey"  # the call's `_meta` entry with ctx.idempotency_key


def mcp_tools(spec: str, *, prefix: str = "", approval: Approval | None = REQUIRE_APPROVAL,
              config: McpConfig | None = None) -> list[Tool]:
    """The tools of the MCP server `spec` ("stdio:<command> [args]" or an http(s) URL).

    A tool that may change the world (see `may_change_world`) is held under `approval`
    unless the agent's `approvals` name it (by name, or by `ToolMatch`); `prefix` tells
    the tools of two servers apart; headers and the timeout come from the settings.

    A server an operator pinned (`interlock mcp pin`, the file `config.pins`) gives the
    tools of its pinned list, and is refused when it is not the pinned server; calls run
    only while it serves that list. A server not pinned gives the tools it lists now, each
    held for approval whatever its annotations claim.
    """
    server = ServerSpec.parse(spec)
    config = config or McpConfig.from_settings()
    pin = load_pins(config.pins).get(spec)
    connection = connection_for(server, config)
    connection.pin = pin
    try:
        listing = block_on_mcp_loop(connection.listing(), 2 * config.connect_timeout + 5)
    except (McpCallError, TimeoutError) as exc:
        raise McpConfigurationError(f"MCP server {spec!r}: {exc or 'no answer'}") from None
    if pin is None:
        log.warning("MCP server %r is not pinned: each of its calls is held for approval "
                    "(interlock mcp pin)", spec)
    else:
        listing = _pinned_listing(pin)
    connection.built_from(listing.sha256)
    return [_tool(connection, listing, t, prefix, approval, pin) for t in listing.tools]


def _pinned_listing(pin: Pin) -> Listing:
    """The tools as the operator accepted them (the server may serve others now: its calls
    are then refused until a new list is accepted)."""
    if tools_sha256(list(pin.tools)) != pin.tools_sha256:
        raise McpConfigurationError(f"MCP pin of {pin.spec!r}: its tools do not match their "
                                    "hash (edited by hand?): pin the server again")
    try:
        tools = tuple(McpTool.model_validate(t) for t in pin.tools)
    except ValueError as exc:
        raise McpConfigurationError(f"MCP pin of {pin.spec!r}: a tool does not read: {exc}"
                                    ) from None
    return Listing(server=pin.server, version=pin.version, tools=tools, sha256=pin.tools_sha256)


def may_change_world(annotations: Mapping[str, Any]) -> bool:
    """True unless the server says the tool is read-only and not destructive: hints missing
    or false count as a change (MCP's own defaults: destructive, not read-only)."""
    return (annotations.get("destructiveHint") is not False
            or annotations.get("readOnlyHint") is not True)


def _tool(connection: Connection, listing: Listing, tool: McpTool, prefix: str,
          approval: Approval | None, pin: Pin | None) -> Tool:
    annotations = (tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                   if tool.annotations else {})
    # A server's claim to only read is believed of a server an operator pinned, only.
    trusted = pin is not None
    read_only = trusted and annotations.get("readOnlyHint") is True
    what = f"MCP server {listing.server!r}, tool {tool.name!r}"
    output = tool.output_schema
    return Tool(
        name=prefix + tool.name,
        description=tool.description or tool.title or "",
        fn=_caller(connection, tool.name, listing.sha256),
        input_type=json_schema_type(tool.input_schema, f"{what}: the input schema"),
        output_type=json_schema_type(output, f"{what}: the output schema") if output else None,
        side_effects=not read_only,  # write-ahead unless the server says it only reads
        approval=approval if not trusted or may_change_world(annotations) else None,
        annotations=annotations,
        provenance={"server": listing.server, "version": listing.version,
                    "tools_sha256": listing.sha256, "tool": tool.name,
                    "pin": pin.sha256 if pin is not None else None},
    )


def _caller(connection: Connection, name: str, tools_sha256: str) -> ToolFunction:
    async def call(arguments: Any, ctx: ToolContext) -> Any:
        meta = cast(RequestParamsMeta, {IDEMPOTENCY_META: ctx.idempotency_key})
        result = await on_mcp_loop(connection.call(
            name, arguments, meta, tools_sha256=tools_sha256))
        return _output(result)

    return call


def _output(result: CallToolResult) -> Any:
    """Structured content when the server gives it, else its text; an error raises."""
    blocks = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    if result.is_error:
        raise McpCallError("\n".join(texts) or "the server reported an error")
    if result.structured_content is not None:
        return result.structured_content
    return "\n".join(texts) if len(texts) == len(blocks) else blocks
