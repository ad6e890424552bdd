"""What an MCP tool adds to a cycle over a local tool, over stdio and streamable HTTP.

One cycle = new chat, send, the model calls `balance` (read-only), the tool answers, the
model answers. The same agent runs with a local `@tool` and with the same tool served by
an MCP server on the official SDK (this file, run with `--serve`), as a subprocess (stdio)
and over HTTP on 127.0.0.1. Rounds alternate the three so the machine's drift hits each
alike; the ratio is the median time a cycle takes against the local tool's. On a shared
machine wall time drifts with the load; CPU a cycle (this process, and the MCP server's
from /proc) drifts much less, so both ratios are printed.

    python -m bench.bench_mcp --cycles 200 --rounds 5 --store memory
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
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


def measured(app: Interlock, n: int, server: int | None) -> tuple[float, float, float]:
    """Wall seconds a cycle, this process's CPU seconds a cycle, the server's."""
    cpu, served = process_cpu(), child_cpu(server)
    wall = asyncio.run(cycles(app, n))
    return wall, (process_cpu() - cpu) / n, (child_cpu(server) - served) / n


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child_cpu(pid: int | None) -> float:
    """A server process's CPU seconds so far (Linux /proc); 0 for none."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stdio_server_pid() -> int:
    """The stdio server this process started (a child of one of its threads)."""
    tasks = Path(f"/proc/{os.getpid()}/task").glob("*/children")
    pids = [int(p) for t in tasks for p in t.read_text().split()]
    return next(p for p in pids if "--serve" in Path(f"/proc/{p}/cmdline").read_text()
                and "stdio" in Path(f"/proc/{p}/cmdline").read_text())


@contextmanager
def http_server() -> Iterator[tuple[str, int]]:
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
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
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
    with http_server() as (url, http_pid), store_url(args.store) as store:
        apps = {"local": (service(store, [local_balance]), None),
                "mcp stdio": (service(store, mcp_tools(f"stdio:python {HERE} --serve stdio",
                                                       config=config)), stdio_server_pid()),
                "mcp http": (service(store, mcp_tools(url, config=config)), http_pid)}
        runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in apps}
        for app, _ in apps.values():
            asyncio.run(cycles(app, max(10, args.cycles // 10)))  # warm up
        for _ in range(args.rounds):
            for name, (app, server) in apps.items():
                runs[name].append(measured(app, args.cycles, server))
        for app, _ in apps.values():
            app.close()
        close_mcp()
    report(args, runs)


def report(args: argparse.Namespace, runs: dict[str, list[tuple[float, float, float]]]) -> None:
    def median(name: str, i: int) -> float:
        return statistics.median(r[i] for r in runs[name])

    wall, cpu = median("local", 0), median("local", 1)
    print(f"store {args.store}, {args.cycles} cycles x {args.rounds} rounds, medians; "
          f"cpu = this process, srv = the MCP server's, ms a cycle")
    print(f"{'tool':<10} {'cycles/s':>9} {'ms/cycle':>9} {'rounds ms':>13} {'ratio':>6} "
          f"{'cpu':>6} {'srv':>6} {'cpu ratio':>9} {'all cpu ratio':>13}")
    for name, spans in runs.items():
        t, c, srv = median(name, 0), median(name, 1), median(name, 2)
        spread = f"{min(r[0] for r in spans) * 1000:.2f}-{max(r[0] for r in spans) * 1000:.2f}"
        print(f"{name:<10} {1 / t:>9.0f} {t * 1000:>9.2f} {spread:>13} {t / wall:>6.2f} "
              f"{c * 1000:>6.2f} {srv * 1000:>6.2f} {c / cpu:>9.2f} {(c + srv) / cpu:>13.2f}")


if __name__ == "__main__":
    main()
