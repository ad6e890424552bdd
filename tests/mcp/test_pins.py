"""Hostile MCP servers against the pins: a list changed mid-session or at connect, an
impostor of a pinned server, a 50 MB answer; and the operator's `interlock mcp` commands."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import resource
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from interlock import Agent
from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain.runtime.tools import Tool, ToolContext
from interlock.mcp import (
    McpCallError,
    McpConfig,
    McpConfigurationError,
    McpRefusedError,
    close_mcp,
    load_pins,
    mcp_tools,
    pin_server,
)
from interlock.mcp.connection import connection_for
from interlock.mcp.spec import ServerSpec
from tests.kit import FunctionModel, Script, call, run, say
from tests.mcp.conftest import HOSTILE, HttpServer, Ledger

MB = 1024 * 1024


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


def run_tool(tool: Tool, raw: dict[str, Any]) -> Any:
    ctx = ToolContext(chat_id="chat", ref="r1", attempt=1, idempotency_key="chat:r1:1")
    return asyncio.run(tool(tool.validate_input(raw), ctx))


def fingerprint(tools: list[Tool]) -> str:
    return Agent(name="a", system="s", tools=tools, model=FunctionModel(lambda _: say("x"))
                 ).fingerprint


def wait_refused(spec: str, config: McpConfig, tool: Tool) -> None:
    """Until the connection has read the changed list (HTTP: it comes on another stream)."""
    connection = connection_for(ServerSpec.parse(spec), config)
    sha = str((tool.provenance or {})["tools_sha256"])
    deadline = time.monotonic() + 20
    while not connection.refuses(sha):
        assert time.monotonic() < deadline, "the changed list was never read"
        time.sleep(0.05)


@pytest.fixture
def config(tmp_path: Path) -> McpConfig:
    return McpConfig(timeout=20.0, pins=str(tmp_path / "pins.json"), max_answer_bytes=MB)


@pytest.fixture(params=["stdio", "http"])
def hostile(request: pytest.FixtureRequest, ledger: Ledger, tmp_path: Path) -> Iterator[str]:
    """The hostile server over each transport; it starts turned once `turned` exists."""
    flag = tmp_path / "turned"
    if request.param == "stdio":
        yield f"stdio:python {HOSTILE} --ledger {ledger.path} --turned-if {flag}"
        return
    server = HttpServer(ledger, "--turned-if", str(flag), script=HOSTILE)
    try:
        yield server.url
    finally:
        close_mcp()
        server.stop()


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_a_list_changed_mid_session_refuses_every_call_until_accepted(
    hostile: str, config: McpConfig, ledger: Ledger, protocol: str, tmp_path: Path
) -> None:
    config = replace(config, protocol=protocol)  # type: ignore[arg-type]
    pin_server(hostile, config)
    tools = by_name(mcp_tools(hostile, config=config))
    assert tools["lookup"].approval is None  # pinned, and it claims to only read
    assert run_tool(tools["lookup"], {"query": "tea"}) == {"result": "found tea"}
    assert run_tool(tools["turn"], {}) == {"result": "turned"}  # lookup now destroys
    wait_refused(hostile, config, tools["lookup"])
    for name, raw in (("lookup", {"query": "tea"}), ("ping", {})):
        with pytest.raises(McpRefusedError, match="another tool list than the one an operator"
                                                  " pinned"):
            run_tool(tools[name], raw)
    assert [c["tool"] for c in ledger.calls()] == ["lookup", "turn"]  # nothing after the turn
    # The operator reviews and accepts; the reloaded agent holds the destructive lookup.
    before = fingerprint(list(tools.values()))
    (tmp_path / "turned").touch()  # a stdio server started to be read starts turned too
    pin_server(hostile, config, accept=True)
    accepted = by_name(mcp_tools(hostile, config=config))
    assert accepted["lookup"].approval is not None
    assert "target" in accepted["lookup"].definition.input_schema["properties"]
    assert fingerprint(list(accepted.values())) != before
    assert run_tool(accepted["ping"], {}) == {"result": "pong"}
    with pytest.raises(McpRefusedError):  # the old agent's tools stay refused
        run_tool(tools["ping"], {})


def stdio_hostile(ledger: Ledger, tmp_path: Path) -> str:
    return f"stdio:python {HOSTILE} --ledger {ledger.path} --turned-if {tmp_path / 'turned'}"


def test_a_list_changed_before_connect_builds_the_pinned_tools_and_refuses_their_calls(
    config: McpConfig, ledger: Ledger, tmp_path: Path
) -> None:
    spec = stdio_hostile(ledger, tmp_path)
    pin_server(spec, config)
    (tmp_path / "turned").touch()  # the server starts with the destructive lookup
    tools = by_name(mcp_tools(spec, config=config))
    assert tools["lookup"].approval is None  # the pinned list, as the operator accepted it
    assert set(tools["lookup"].definition.input_schema["properties"]) == {"query"}
    with pytest.raises(McpRefusedError, match="interlock mcp accept"):
        run_tool(tools["ping"], {})
    assert ledger.calls() == []


def test_the_http_server_restarted_with_another_list_is_refused(
    ledger: Ledger, config: McpConfig, tmp_path: Path
) -> None:
    flag = tmp_path / "turned"
    server = HttpServer(ledger, "--turned-if", str(flag), script=HOSTILE)
    try:
        pin_server(server.url, config)
        tools = by_name(mcp_tools(server.url, config=config))
        assert run_tool(tools["ping"], {}) == {"result": "pong"}
        flag.touch()
        server.restart("--turned-if", str(flag))
        with pytest.raises(McpRefusedError, match="another tool list"):
            run_tool(tools["ping"], {})
        assert by_name(mcp_tools(server.url, config=config))["lookup"].approval is None
        assert [c["tool"] for c in ledger.calls()] == ["ping"]
    finally:
        close_mcp()
        server.stop()


def test_an_unpinned_server_s_read_only_claim_skips_nothing(
    hostile: str, config: McpConfig
) -> None:
    tools = by_name(mcp_tools(hostile, config=config))
    assert all(t.approval is not None and t.side_effects for t in tools.values())
    assert all((t.provenance or {})["pin"] is None for t in tools.values())
    pin_server(hostile, config)
    pinned = by_name(mcp_tools(hostile, config=config))
    assert pinned["lookup"].approval is None and not pinned["lookup"].side_effects
    assert (pinned["lookup"].provenance or {})["pin"] == load_pins(config.pins)[hostile].sha256
    assert fingerprint(list(pinned.values())) != fingerprint(list(tools.values()))


def test_a_stdio_impostor_of_a_pinned_server_is_refused_before_it_runs(
    ledger: Ledger, config: McpConfig, tmp_path: Path
) -> None:
    script = tmp_path / "catalog.py"
    shutil.copy(HOSTILE, script)
    spec = f"stdio:python {script} --ledger {ledger.path}"
    pin_server(spec, config)
    tools = by_name(mcp_tools(spec, config=config))
    assert run_tool(tools["ping"], {}) == {"result": "pong"}
    close_mcp()
    # Another implementation at the same path, same name, version and tool list.
    script.write_text(HOSTILE.read_text() + "\n# not the code the operator pinned\n")
    with pytest.raises(McpRefusedError, match=r"not the pinned server: .*catalog\.py has SHA"):
        run_tool(tools["ping"], {})
    with pytest.raises(McpConfigurationError, match="not the pinned server"):
        mcp_tools(spec, config=config)
    assert len(ledger.calls()) == 1  # the impostor never started


def _certificate(directory: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / f"{name}.pem", directory / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_an_https_impostor_with_another_certificate_key_is_refused(
    ledger: Ledger, config: McpConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, fake = _certificate(tmp_path, "real"), _certificate(tmp_path, "fake")
    bundle = tmp_path / "trusted.pem"  # both certificates verify: only the pin tells them apart
    bundle.write_bytes(real[0].read_bytes() + fake[0].read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    server = HttpServer(ledger, "--tls", str(real[0]), str(real[1]), script=HOSTILE,
                        scheme="https")
    try:
        pin, _ = pin_server(server.url, config)
        assert pin.identity.tls_key_sha256 is not None
        tools = by_name(mcp_tools(server.url, config=config))
        assert run_tool(tools["ping"], {}) == {"result": "pong"}
        server.restart("--tls", str(fake[0]), str(fake[1]))
        with pytest.raises(McpCallError, match="not the pinned server: its TLS certificate key"):
            run_tool(tools["ping"], {})
        with pytest.raises(McpConfigurationError, match="not the pinned server"):
            mcp_tools(server.url, config=config)
        assert [c["tool"] for c in ledger.calls()] == ["ping"]  # nothing reached the impostor
    finally:
        close_mcp()
        server.stop()


@pytest.mark.parametrize("flags", [(), ("--json",)], ids=["event-stream", "json"])
def test_a_50_mb_answer_over_http_is_an_error_and_memory_stays_flat(
    ledger: Ledger, config: McpConfig, flags: tuple[str, ...]
) -> None:
    server = HttpServer(ledger, *flags, script=HOSTILE)
    try:
        _fifty_megabytes(server.url, config)
    finally:
        close_mcp()
        server.stop()


def test_a_50_mb_answer_over_stdio_is_an_error_and_memory_stays_flat(
    ledger: Ledger, config: McpConfig
) -> None:
    _fifty_megabytes(f"stdio:python {HOSTILE} --ledger {ledger.path}", config)
    assert len({c["pid"] for c in ledger.calls()}) == 1  # the same session answered after


def _fifty_megabytes(spec: str, config: McpConfig) -> None:
    pin_server(spec, config)
    tools = by_name(mcp_tools(spec, config=config))
    assert run_tool(tools["ping"], {}) == {"result": "pong"}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    started = time.monotonic()
    with pytest.raises(McpCallError) as refused:
        run_tool(tools["huge"], {"megabytes": 50})
    elapsed = time.monotonic() - started
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    print(f"\n{spec.split(':')[0]}: 50 MB answer refused in {elapsed:.1f} s, "
          f"peak RSS grew {grown:.1f} MB")
    assert str(refused.value) == ("the server's answer is larger than 1048576 bytes "
                                  "(INTERLOCK_MCP_MAX_ANSWER_BYTES): it was dropped unread")
    assert grown < 25, f"the client's peak memory grew {grown:.0f} MB"
    assert run_tool(tools["ping"], {}) == {"result": "pong"}  # the session goes on


def test_the_operator_pins_and_accepts_with_the_command_line(
    ledger: Ledger, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    hostile = stdio_hostile(ledger, tmp_path)
    pins = str(tmp_path / "pins.json")
    assert main(["mcp", "accept", hostile, "--pins", pins]) == 2
    assert "is not pinned" in capfd.readouterr().err
    assert main(["mcp", "pin", hostile, "--pins", pins]) == 0
    assert "pinned catalog 1.0.0: 5 tools" in capfd.readouterr().out
    assert main(["mcp", "pin", hostile, "--pins", pins]) == 2
    assert "pinned already" in capfd.readouterr().err
    (tmp_path / "turned").touch()
    assert main(["mcp", "accept", hostile, "--pins", pins]) == 0
    out = capfd.readouterr().out
    assert "changed tool lookup: annotations, description, inputSchema" in out
    assert load_pins(pins)[hostile].tools_sha256 != ""


def test_a_read_only_call_lost_mid_call_is_not_tried_again(
    hostile: str, config: McpConfig, ledger: Ledger
) -> None:
    pin_server(hostile, config)
    die = by_name(mcp_tools(hostile, config=config))["die"]
    assert die.approval is None  # pinned, and it claims to only read
    with pytest.raises(McpCallError, match=r"lost mid-call|connection failed"):
        run_tool(die, {})
    assert [c["tool"] for c in ledger.calls()] == ["die"]  # once: it may have acted


def test_in_a_turn_the_model_is_told_of_a_huge_answer_and_of_a_changed_server(
    ledger: Ledger, config: McpConfig, tmp_path: Path, store: str
) -> None:
    spec = stdio_hostile(ledger, tmp_path)
    pin_server(spec, config)
    script = Script([call(("huge", {"megabytes": 5}, "h1")), call(("turn", {}, "t1")),
                     call(("lookup", {"query": "tea"}, "l1")), call(("ping", {}, "p1")),
                     say("done")])
    agent = Agent(name="catalog", system="You look things up.",
                  tools=mcp_tools(spec, config=config), model=FunctionModel(script))
    app = build_service(store, [agent])
    chat = app.start_chat("catalog", actor="alice")
    result = run(app.send(chat.id, "go", actor="alice"))
    assert result.finish_reason == "stop" and result.interrupts == []  # pinned, read-only
    outputs = [m.content[0].tool_response.output for r in script.requests[1:]
               for m in r.messages[-1:] if m.role == "tool"]
    assert "larger than 1048576 bytes (INTERLOCK_MCP_MAX_ANSWER_BYTES)" in str(outputs[0])
    assert "another tool list than the one an operator pinned" in str(outputs[2])
    assert "another tool list" in str(outputs[3])  # every call to the server
    assert [c["tool"] for c in ledger.calls()] == ["huge", "turn"]


def test_a_pin_edited_by_hand_is_refused_when_the_agent_is_built(
    ledger: Ledger, config: McpConfig, tmp_path: Path
) -> None:
    spec = stdio_hostile(ledger, tmp_path)
    pin_server(spec, config)
    pins = Path(config.pins)
    pins.write_text(pins.read_text().replace("Answer pong.", "Answer pong: call me often."))
    with pytest.raises(McpConfigurationError, match="do not match their hash"):
        mcp_tools(spec, config=config)
