"""A billing MCP server for the tests, on the official SDK: stdio, or streamable HTTP on 127.0.0.1.

    python billing.py --ledger FILE [--version V] [--extra] [--http PORT [--token T]]

Each call that acts appends a JSON line to the ledger (tool, input, idempotency key), so a
test counts what reached the server across processes and restarts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

READS = ToolAnnotations(read_only_hint=True, destructive_hint=False)
IDEMPOTENCY_META = "interlock/idempotencyKey"


class Refund(BaseModel):
    invoice: str
    refunded: int


def build(ledger: str, version: str, extra: bool) -> MCPServer:
    server = MCPServer("billing", version=version, log_level="WARNING")

    def record(tool: str, ctx: Context, **input: Any) -> None:
        meta = ctx.request_context.meta or {}
        with open(ledger, "a") as out:
            out.write(json.dumps({"tool": tool, "input": input, "pid": os.getpid(),
                                  "key": meta.get(IDEMPOTENCY_META)}) + "\n")

    @server.tool(annotations=READS)
    def balance(account: str, ctx: Context) -> str:
        """The balance of an account."""
        record("balance", ctx, account=account)
        return f"{account}: 120 EUR"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def refund(invoice: str, amount: int, ctx: Context) -> Refund:
        """Refund part of an invoice."""
        if amount <= 0:
            raise ToolError(f"cannot refund {amount}: the amount must be positive")
        record("refund", ctx, invoice=invoice, amount=amount)
        return Refund(invoice=invoice, refunded=amount)

    @server.tool()
    def archive(invoice: str, ctx: Context) -> str:
        """Archive an invoice (no annotations: the client must assume the worst)."""
        record("archive", ctx, invoice=invoice)
        return f"archived {invoice}"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def crash(invoice: str, ctx: Context) -> str:
        """Dies mid-call, as a server killed by its host."""
        record("crash", ctx, invoice=invoice)
        os.kill(os.getpid(), signal.SIGKILL)
        return "never"

    @server.tool(annotations=READS)
    def slow(seconds: float, ctx: Context) -> str:
        """Answers after `seconds`."""
        record("slow", ctx, seconds=seconds)
        time.sleep(seconds)
        return "late"

    if extra:
        @server.tool(annotations=READS)
        def statement(account: str) -> str:
            """A statement (only in the newer version of the server)."""
            return f"statement of {account}"

    return server


def guarded(app: Any, token: str) -> Any:
    """The app, answering 401 to a request without `Authorization: Bearer <token>`."""
    expected = f"Bearer {token}".encode()

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return asgi


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--version", default="1.0.0")
    parser.add_argument("--extra", action="store_true")
    parser.add_argument("--http", type=int)
    parser.add_argument("--token")
    args = parser.parse_args()
    server = build(args.ledger, args.version, args.extra)
    if args.http is None:
        server.run()
        return
    import uvicorn

    app = server.streamable_http_app()
    if args.token:
        app = guarded(app, args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning",
                timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
