"""MCP servers started by the tests (stdio and streamable HTTP on 127.0.0.1) and their ledgers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlock.mcp import McpConfig, Pin, close_mcp, pin_server
from interlock.mcp.pins import identity_of, save_pin
from interlock.mcp.spec import ServerSpec

SERVER = Path(__file__).parent / "servers" / "billing.py"
HOSTILE = Path(__file__).parent / "servers" / "hostile.py"
CONFIG = McpConfig(timeout=10.0)  # its pin file, mcp-pins.json, is in no test's directory


class Ledger:
    """What reached the server: one JSON line per call that acted."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        rows = [json.loads(line) for line in self.path.read_text().splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


def stdio_spec(ledger: Ledger, *flags: str) -> str:
    return f"stdio:python {SERVER} --ledger {ledger.path} {' '.join(flags)}".strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpServer:
    """The billing server over streamable HTTP, in a subprocess; `restart` keeps the URL."""

    def __init__(self, ledger: Ledger, *flags: str, script: Path = SERVER,
                 scheme: str = "http") -> None:
        self.ledger = ledger
        self.script = script
        self.port = free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}/mcp"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start(*flags)

    def start(self, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(self.script), "--ledger", str(self.ledger.path),
             "--http", str(self.port), *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the MCP server exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the MCP server did not listen within 30 s")

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def restart(self, *flags: str) -> None:
        self.stop()
        self.start(*flags)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.jsonl")


@pytest.fixture(autouse=True)
def closed_connections() -> Iterator[None]:
    """Every test starts and ends with no MCP session open (stdio servers exit)."""
    yield
    close_mcp()


@pytest.fixture
def http_server(ledger: Ledger) -> Iterator[HttpServer]:
    server = HttpServer(ledger)
    try:
        yield server
    finally:
        server.stop()


_listed: dict[str, Pin] = {}


def pin_billing(spec: str, pins: Path) -> None:
    """Pin the billing server `spec` (its list read once a run, its identity each time)."""
    kind = spec.partition(":")[0]
    if kind not in _listed:
        _listed[kind], _ = pin_server(spec, McpConfig(pins=str(pins.with_suffix(".first"))))
    first = _listed[kind]
    save_pin(pins, Pin(spec, identity_of(ServerSpec.parse(spec)), first.server, first.version,
                       first.tools, first.tools_sha256, first.pinned_at))


@pytest.fixture(params=["stdio", "http"])
def spec(request: pytest.FixtureRequest, ledger: Ledger, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> str:
    """The billing server over each transport, pinned by the operator in mcp-pins.json of
    the test's directory (its working directory)."""
    text = (stdio_spec(ledger) if request.param == "stdio"
            else str(request.getfixturevalue("http_server").url))
    monkeypatch.chdir(tmp_path)
    pin_billing(text, tmp_path / "mcp-pins.json")
    return text
