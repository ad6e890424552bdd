"""Tools from MCP servers: `mcp_tools("stdio:python -m billing")`, `mcp_tools("https://…/mcp")`.

Each tool of the server becomes an Interlock `Tool` under the agent's approval policies;
docs/mcp.md has the whole story. Needs the `mcp` extra: `pip install "interlock[mcp]"`.
"""

from __future__ import annotations

try:
    import mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed in development
    raise ImportError('interlock.mcp needs the MCP SDK: pip install "interlock[mcp]"',
                      name="mcp") from exc

from interlock.domain.chat.policies import ToolMatch
from interlock.mcp.config import McpConfig
from interlock.mcp.connection import close_mcp, pin_changes, pin_server
from interlock.mcp.errors import McpCallError, McpConfigurationError, McpRefusedError
from interlock.mcp.pins import Pin, load_pins
from interlock.mcp.spec import ServerSpec
from interlock.mcp.tools import IDEMPOTENCY_META, REQUIRE_APPROVAL, may_change_world, mcp_tools

__all__ = [
    "IDEMPOTENCY_META",
    "REQUIRE_APPROVAL",
    "McpCallError",
    "McpConfig",
    "McpConfigurationError",
    "McpRefusedError",
    "Pin",
    "ServerSpec",
    "ToolMatch",
    "close_mcp",
    "load_pins",
    "may_change_world",
    "mcp_tools",
    "pin_changes",
    "pin_server",
]
