"""What can go wrong with an MCP server: its configuration, or one call."""

from __future__ import annotations

from interlock.domain.errors import ConfigurationError


class McpConfigurationError(ConfigurationError):
    """A server spec, its settings or its tool list cannot be used (found at agent load)."""


class McpCallError(Exception):
    """One call failed: the server's own error, a lost connection or a timeout.

    It fails that call only; the model is told, as for any tool that raises.
    """


class McpRefusedError(McpCallError):
    """The call is refused before it is sent: the server is not the pinned one, or its tool
    list is not the one the agent's tools were built from."""
