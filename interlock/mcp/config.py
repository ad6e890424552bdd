"""What the settings say about MCP servers: headers per URL, timeouts, the answer cap and
the pin file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from interlock.mcp.errors import McpConfigurationError
from interlock.settings import Settings, env_name, load_settings


@dataclass(frozen=True)
class McpConfig:
    """Headers for each HTTP server URL (credentials: from settings, never from code)."""

    headers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    timeout: float = 30.0  # a call
    connect_timeout: float = 30.0  # starting a stdio server, connecting, listing its tools
    # "auto" probes for the 2026-07-28 protocol and falls back to the initialize handshake;
    # "legacy" goes straight to the handshake (and its stateful HTTP sessions).
    protocol: Literal["auto", "legacy"] = "auto"
    max_answer_bytes: int = 4 * 1024 * 1024  # one message from a server: past it, dropped
    pins: str = "mcp-pins.json"  # the operator's pins (interlock/mcp/pins.py)

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> McpConfig:
        settings = settings or load_settings()
        text = settings.mcp_headers.get_secret_value() if settings.mcp_headers else "{}"
        return cls(headers=_headers(text), timeout=settings.mcp_timeout,
                   connect_timeout=settings.mcp_connect_timeout,
                   max_answer_bytes=settings.mcp_max_answer_bytes, pins=settings.mcp_pins)

    def headers_for(self, url: str) -> dict[str, str]:
        return dict(self.headers.get(url, {}))


def _headers(text: str) -> dict[str, dict[str, str]]:
    where = env_name("mcp_headers")
    try:
        data: Any = json.loads(text)
    except ValueError:
        raise McpConfigurationError(f"{where} is not JSON") from None  # never echo a secret
    if not isinstance(data, dict) or not all(
        isinstance(h, dict) and all(isinstance(v, str) for v in h.values())
        for h in data.values()
    ):
        raise McpConfigurationError(
            f'{where} must be {{"<server url>": {{"<header>": "<value>"}}}}')
    return data
