"""`interlock mcp pin|accept SERVER`: an operator pins an MCP server, or accepts what it
serves now (docs/mcp.md)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from interlock.mcp import McpConfig, close_mcp, pin_changes, pin_server


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "mcp", help="pin MCP servers: what each one is and the tool list it serves",
        description="Pin an MCP server (stdio: its command and the hashes of the files it "
        "runs; HTTP: its URL and TLS key) and the tool list it serves, in the pin file "
        "(INTERLOCK_MCP_PINS). Agents built afterwards call it only while it is that server "
        "and serves that list.")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in (("pin", "pin a server not pinned yet"),
                       ("accept", "accept what a pinned server is and serves now, after "
                                  "review (the agent is reloaded to use it)")):
        q = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        q.add_argument("server", help="the spec as mcp_tools names it: 'stdio:<command>' or a URL")
        q.add_argument("--pins", help="the pin file (INTERLOCK_MCP_PINS; mcp-pins.json)")
        q.set_defaults(run=_pin, accept=name == "accept")


def _pin(args: argparse.Namespace) -> int:
    config = McpConfig.from_settings()
    if args.pins:
        config = replace(config, pins=args.pins)
    try:
        pin, old = pin_server(args.server, config, accept=args.accept)
    finally:
        close_mcp()
    for line in pin_changes(old, pin):
        print(f"{args.server}: {line}")
    print(f"{args.server}: pin {pin.sha256[:16]}… written to {config.pins}")
    return 0
