"""What an MCP tool adds to a cycle over a local tool, over stdio and streamable HTTP.

One cycle = new chat, send, the model calls `balance` (read-only), the tool answers, the
model answers. The same agent runs with a local `@tool` and with the same tool served by
an MCP server on the official SDK (this file, run with `--serve`), as a subprocess (stdio)
and over HTTP on 127.0.0.1. Rounds alternate the three so the machine's drift hits each
alike; the ratio is the median time a cycle takes against the local tool's.

    python -m bench.bench_mcp --cycles 200 --rounds 5 --store memory
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel

from interlock import Agent, FunctionModel, ModelRequest, ModelResponse, ToolContext, tool
from interlock.bootstrap import build_service
from interlock.domain import Interlock, Message, Part, ToolRequest
from interlock.domain.runtime.tools import Tool
from interlock.mcp import McpConfig, close_mcp, mcp_tools

HERE = Path(__file__).resolve()


def serve(transport: str, port: int) -> None:
    """The MCP server: one read-only tool, as cheap as the local one."""
    from mcp.server.mcpserver import MCPServer  # a benchmark's server mode, not the house
    from mcp.types import ToolAnnotations

    server = MCPServer("bench", version="1", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
    async def balance(account: str) -> str:
        return f"{account}: 120 EUR"

    if transport == "stdio":
        server.run()
    else:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port,
                    log_level="warning")


class Account(BaseModel):
    account: str


@tool(name="balance", side_effects=False)
async def local_balance(input: Account, ctx: ToolContext) -> str:
    return f"{input.account}: 120 EUR"


def script(request: ModelRequest) -> ModelResponse:
    if request.messages[-1].role == "tool":
        return ModelResponse(message=Message(role="model", content=[Part(text="120 EUR")]))
    part = Part(tool_request=ToolRequest(name="balance", input={"account": "A1"}))
    return ModelResponse(message=Message(role="model", content=[part]))


def service(store: str, tools: list[Tool]) -> Interlock:
    agent = Agent(name="bench", system="Read balances.", tools=tools, model=FunctionModel(script))
    return build_service(store, [agent])


async def cycles(app: Interlock, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        chat = app.start_chat("bench", actor="alice")
        done = await app.send(chat.id, "my balance?", actor="alice")
        assert done.finish_reason == "stop" and done.text == "120 EUR", done
    return (time.perf_counter() - started) / n


@contextmanager
def http_server() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(HERE), "--serve", "http", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def store_url(kind: str) -> Iterator[str]:
    if kind == "memory":
        yield "memory://"
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield f"sqlite:///{tmp}/bench.db"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--store", default="memory", choices=["memory", "sqlite"])
    parser.add_argument("--serve", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    config = McpConfig(timeout=30)
    with http_server() as url, store_url(args.store) as store:
        apps = {"local": service(store, [local_balance]),
                "mcp stdio": service(store, mcp_tools(f"stdio:python {HERE} --serve stdio",
                                                      config=config)),
                "mcp http": service(store, mcp_tools(url, config=config))}
        times: dict[str, list[float]] = {name: [] for name in apps}
        for app in apps.values():
            asyncio.run(cycles(app, max(10, args.cycles // 10)))  # warm up
        for _ in range(args.rounds):
            for name, app in apps.items():
                times[name].append(asyncio.run(cycles(app, args.cycles)))
        for app in apps.values():
            app.close()
        close_mcp()
    local = statistics.median(times["local"])
    print(f"store {args.store}, {args.cycles} cycles x {args.rounds} rounds, medians")
    print(f"{'tool':<10} {'cycles/s':>9} {'ms/cycle':>9} {'rounds ms':>13} {'added ms':>9} "
          f"{'ratio':>6}")
    for name, spans in times.items():
        t = statistics.median(spans)
        spread = f"{min(spans) * 1000:.2f}-{max(spans) * 1000:.2f}"
        print(f"{name:<10} {1 / t:>9.0f} {t * 1000:>9.2f} {spread:>13} "
              f"{(t - local) * 1000:>9.2f} {t / local:>6.2f}")


if __name__ == "__main__":
    main()
