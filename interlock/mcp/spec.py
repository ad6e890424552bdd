"""Which MCP server: `stdio:<command> [args]` (a subprocess) or an http(s) URL (streamable HTTP)."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from interlock.mcp.errors import McpConfigurationError

USAGE = "an MCP server is 'stdio:<command> [args]' or an http:// or https:// URL"


@dataclass(frozen=True)
class ServerSpec:
    """A parsed server spec; `python` as the command means this interpreter."""

    text: str
    kind: Literal["stdio", "http"]
    argv: tuple[str, ...] = ()
    url: str = ""

    @classmethod
    def parse(cls, text: str) -> ServerSpec:
        if not isinstance(text, str) or not text.strip():
            raise McpConfigurationError(f"{text!r}: {USAGE}")
        if text.startswith("stdio:"):
            return cls(text, "stdio", argv=_argv(text))
        parts = urlsplit(text)
        if parts.scheme in ("http", "https") and parts.hostname:
            return cls(text, "http", url=text)
        raise McpConfigurationError(f"{text!r}: {USAGE}")


def _argv(text: str) -> tuple[str, ...]:
    try:
        argv = shlex.split(text.removeprefix("stdio:"))
    except ValueError as exc:
        raise McpConfigurationError(f"{text!r}: its command does not parse: {exc}") from None
    if not argv:
        raise McpConfigurationError(f"{text!r}: no command after 'stdio:' ({USAGE})")
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable  # the server runs under the service's own interpreter
    return tuple(argv)
