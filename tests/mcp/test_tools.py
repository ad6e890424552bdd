"""An MCP server's tools as Interlock tools: schemas, annotations, identity, settings, failures."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from interlock import Agent
from interlock.domain.runtime.tools import SchemaError, Tool, ToolContext
from interlock.mcp import (
    McpCallError,
    McpConfig,
    McpConfigurationError,
    may_change_world,
    mcp_tools,
)
from tests.kit import FunctionModel, say
from tests.mcp.conftest import CONFIG, HttpServer, Ledger, free_port, stdio_spec


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


def run_tool(tool: Tool, raw: dict[str, Any], key: str = "chat:r1:1") -> Any:
    ctx = ToolContext(chat_id="chat", ref="r1", attempt=1, idempotency_key=key)
    return asyncio.run(tool(tool.validate_input(raw), ctx))


def fingerprint(tools: list[Tool]) -> str:
    return Agent(name="a", system="s", tools=tools, model=FunctionModel(lambda _: say("x"))
                 ).fingerprint


def test_each_tool_carries_the_server_s_schema_annotations_and_identity(spec: str) -> None:
    tools = by_name(mcp_tools(spec, config=CONFIG))
    assert set(tools) == {"balance", "refund", "archive", "crash", "slow"}
    refund = tools["refund"]
    schema = refund.definition.input_schema
    assert schema["required"] == ["invoice", "amount"]
    assert schema["properties"]["amount"]["type"] == "integer"
    assert refund.definition.output_schema is not None  # the server's, as it listed it
    assert refund.annotations == {"destructiveHint": True}
    assert refund.provenance is not None
    assert {k: refund.provenance[k] for k in ("server", "version", "tool")} == {
        "server": "billing", "version": "1.0.0", "tool": "refund"}
    assert refund.description == "Refund part of an invoice."


def test_only_a_read_only_non_destructive_tool_of_a_pinned_server_escapes_approval(
    spec: str, tmp_path: Path
) -> None:
    tools = by_name(mcp_tools(spec, config=CONFIG))  # the spec fixture pinned it
    held = {name for name, t in tools.items() if t.approval is not None}
    assert held == {"refund", "archive", "crash"}  # destructive, unannotated, destructive
    assert not tools["balance"].side_effects and tools["refund"].side_effects
    (tmp_path / "mcp-pins.json").unlink()  # the same server, not pinned: its claims are not
    unpinned = by_name(mcp_tools(spec, config=CONFIG))  # believed
    assert all(t.approval is not None and t.side_effects for t in unpinned.values())


def test_input_is_validated_against_the_server_s_schema_before_any_call(
    spec: str, ledger: Ledger
) -> None:
    refund = by_name(mcp_tools(spec, config=CONFIG))["refund"]
    with pytest.raises(SchemaError) as bad:
        refund.validate_input({"invoice": "INV-1", "amount": "lots"})
    assert "amount: 'lots' is not of type 'integer'" in bad.value.errors[0]["msg"]
    with pytest.raises(SchemaError) as missing:
        refund.validate_input({"invoice": "INV-1"})
    assert "'amount' is a required property" in missing.value.errors[0]["msg"]
    assert ledger.calls() == []


def test_the_output_or_the_server_s_error_comes_back_and_the_key_is_sent(
    spec: str, ledger: Ledger
) -> None:
    tools = by_name(mcp_tools(spec, config=CONFIG))
    assert run_tool(tools["refund"], {"invoice": "INV-1", "amount": 30}, key="c:r:7") == {
        "invoice": "INV-1", "refunded": 30}
    with pytest.raises(McpCallError, match="the amount must be positive"):
        run_tool(tools["refund"], {"invoice": "INV-1", "amount": -5})
    assert [(c["input"]["amount"], c["key"]) for c in ledger.calls("refund")] == [(30, "c:r:7")]


@pytest.mark.parametrize("bad", ["", "ftp://host/mcp", "stdio:", "stdio:  ", "stdio:python 'x",
                                 "http://", "billing"])
def test_a_malformed_server_spec_is_named_in_one_line(bad: str) -> None:
    with pytest.raises(McpConfigurationError) as refused:
        mcp_tools(bad, config=CONFIG)
    assert repr(bad) in str(refused.value) and "\n" not in str(refused.value)


def test_a_server_that_does_not_answer_is_a_configuration_error_at_load() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(McpConfigurationError, match="cannot connect"):
        mcp_tools(url, config=McpConfig(timeout=5))
    with pytest.raises(McpConfigurationError, match="cannot connect"):
        mcp_tools("stdio:python -c 'raise SystemExit(3)'", config=McpConfig(timeout=5))


def test_http_headers_come_from_the_settings(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = HttpServer(ledger, "--token", "s3cret")
    try:
        monkeypatch.delenv("INTERLOCK_MCP_HEADERS", raising=False)
        with pytest.raises(McpConfigurationError, match="401"):
            mcp_tools(server.url)
        monkeypatch.setenv("INTERLOCK_MCP_HEADERS",
                           json.dumps({server.url: {"Authorization": "Bearer s3cret"}}))
        balance = by_name(mcp_tools(server.url))["balance"]
        assert run_tool(balance, {"account": "A1"}) == {"result": "A1: 120 EUR"}
        monkeypatch.setenv("INTERLOCK_MCP_HEADERS", "{not json s3cret")
        with pytest.raises(McpConfigurationError) as bad:
            mcp_tools(server.url)
        assert "INTERLOCK_MCP_HEADERS is not JSON" in str(bad.value)
        assert "s3cret" not in str(bad.value)
    finally:
        server.stop()


def test_the_fingerprint_changes_when_the_server_s_tool_list_changes(
    http_server: HttpServer
) -> None:
    before = mcp_tools(http_server.url, config=CONFIG)
    assert fingerprint(mcp_tools(http_server.url, config=CONFIG)) == fingerprint(before)
    http_server.restart("--extra")
    after = mcp_tools(http_server.url, config=CONFIG)
    assert "statement" in by_name(after) and fingerprint(after) != fingerprint(before)
    http_server.restart("--extra", "--version", "1.1.0")
    newer = mcp_tools(http_server.url, config=CONFIG)
    assert by_name(newer)["balance"].provenance["version"] == "1.1.0"  # type: ignore[index]
    assert fingerprint(newer) != fingerprint(after)
    with pytest.raises(McpCallError, match="now lists other tools"):  # built on the old list
        run_tool(by_name(before)["balance"], {"account": "A1"})


def test_a_slow_server_ends_the_call_as_an_error_and_the_next_call_reconnects(
    spec: str, ledger: Ledger
) -> None:
    tools = by_name(mcp_tools(spec, config=McpConfig(timeout=1.5)))
    started = time.monotonic()
    with pytest.raises(McpCallError, match=r"no answer from the server within 1\.5 s"):
        run_tool(tools["slow"], {"seconds": 30})
    assert time.monotonic() - started < 5  # not retried: a slow server is not a lost one
    assert run_tool(tools["balance"], {"account": "A1"}) == {"result": "A1: 120 EUR"}


def test_a_call_after_an_http_server_restart_reconnects(http_server: HttpServer) -> None:
    balance = by_name(mcp_tools(http_server.url, config=CONFIG))["balance"]
    assert run_tool(balance, {"account": "A1"}) == {"result": "A1: 120 EUR"}
    http_server.restart()
    assert run_tool(balance, {"account": "A2"}) == {"result": "A2: 120 EUR"}


def test_a_server_killed_mid_call_fails_that_call_and_the_next_one_reconnects(
    spec: str, ledger: Ledger, request: pytest.FixtureRequest
) -> None:
    tools = by_name(mcp_tools(spec, config=CONFIG))
    with pytest.raises(McpCallError, match=r"lost mid-call|connection failed"):
        run_tool(tools["crash"], {"invoice": "INV-1"})
    if spec.startswith("http"):
        request.getfixturevalue("http_server").restart()
    assert run_tool(tools["refund"], {"invoice": "INV-2", "amount": 1}) == {
        "invoice": "INV-2", "refunded": 1}
    pids = {c["pid"] for c in ledger.calls()}
    assert len(pids) == 2  # a new server process answered


def test_a_stdio_command_is_split_as_a_shell_would_and_run_without_one(ledger: Ledger) -> None:
    spec = stdio_spec(ledger).replace("stdio:python", f"stdio:{shlex.quote(sys.executable)}")
    balance = by_name(mcp_tools(spec + " '--version' '2.0 beta'", config=CONFIG))["balance"]
    assert balance.provenance is not None and balance.provenance["version"] == "2.0 beta"


@pytest.mark.parametrize(("annotations", "acts"), [
    ({"readOnlyHint": True, "destructiveHint": False}, False),
    ({"readOnlyHint": True}, True),  # destructiveHint missing: assume it
    ({"destructiveHint": False}, True),  # not said to be read-only: it may write
    ({"readOnlyHint": False, "destructiveHint": False}, True),
    ({"readOnlyHint": "yes", "destructiveHint": False}, True),  # only a real true counts
    ({}, True),
])
def test_only_read_only_and_not_destructive_counts_as_not_acting(
    annotations: dict[str, Any], acts: bool
) -> None:
    assert may_change_world(annotations) is acts


def test_a_prefix_tells_two_servers_apart_and_calls_use_the_server_s_name(
    ledger: Ledger
) -> None:
    tools = by_name(mcp_tools(stdio_spec(ledger), prefix="billing_", config=CONFIG))
    assert "billing_balance" in tools and "balance" not in tools
    assert tools["billing_balance"].provenance["tool"] == "balance"  # type: ignore[index]
    assert run_tool(tools["billing_balance"], {"account": "A9"}) == {"result": "A9: 120 EUR"}
    assert [c["tool"] for c in ledger.calls()] == ["balance"]


def test_concurrent_calls_share_the_one_session(spec: str, ledger: Ledger) -> None:
    balance = by_name(mcp_tools(spec, config=CONFIG))["balance"]

    async def many() -> list[Any]:
        return await asyncio.gather(*(
            balance({"account": f"A{i}"}, ToolContext(chat_id="c", ref=f"r{i}", attempt=1,
                                                      idempotency_key=f"c:r{i}:1"))
            for i in range(12)))

    outputs = asyncio.run(many())
    assert outputs == [{"result": f"A{i}: 120 EUR"} for i in range(12)]
    calls = ledger.calls("balance")
    assert sorted(c["key"] for c in calls) == sorted(f"c:r{i}:1" for i in range(12))
    assert len({c["pid"] for c in calls}) == 1
