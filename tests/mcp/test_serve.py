"""`interlock serve` with an agent whose tools come from an MCP server."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from interlock.cli.main import main
from interlock.client import Client
from tests.api.server import ServeProcess
from tests.mcp.conftest import Ledger, stdio_spec


def test_serve_lists_the_server_s_tools_and_its_stdio_server_ends_with_it(
    ledger: Ledger
) -> None:
    served = ServeProcess("--agents", "tests.mcp.agents:AGENTS", "--store", "memory://",
                          env={"BILLING_MCP": stdio_spec(ledger)})
    try:
        tasks = Path(f"/proc/{served.proc.pid}/task").glob("*/children")
        [server_pid] = [int(pid) for t in tasks for pid in t.read_text().split()]
        with Client(served.url) as client:
            [agent] = client.agents()
        tools = {t["name"] for t in agent["tools"]}
        assert {"balance", "refund"} <= tools and agent["fingerprint"]
    finally:
        served.stop()
    assert _ends(server_pid, within=10)  # its stdin closed with the service: it exits


def _ends(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True  # exited; its parent is gone, init reaps it
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("spec", ["ftp://billing.example/mcp", "stdio:"])
def test_serve_refuses_a_bad_mcp_server_in_one_line(
    spec: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BILLING_MCP", spec)
    monkeypatch.setenv("INTERLOCK_SECRET", os.environ.get("INTERLOCK_SECRET", "x" * 40))
    assert main(["serve", "--agents", "tests.mcp.agents:AGENTS", "--store", "memory://"]) == 2
    err = capsys.readouterr().err.strip()
    assert repr(spec) in err and "\n" not in err
