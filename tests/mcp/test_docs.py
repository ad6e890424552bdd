"""Every code sample of docs/mcp.md runs: files written, Python and `interlock mcp` commands
run in order, settings read."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from interlock.cli.main import main
from interlock.mcp import McpConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(DOC.read_text()) if lang == kind]


def test_the_samples_run_in_order_against_the_server_they_define(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # `python -m billing_server` finds the module written here
    monkeypatch.delenv("INTERLOCK_MCP_PINS", raising=False)  # mcp-pins.json, here
    namespace: dict[str, object] = {"__name__": "docs_mcp"}
    ran = commands = 0
    samples = [(k, b) for k, b in BLOCK.findall(DOC.read_text()) if k in ("python", "sh")]
    for kind, body in samples[1:]:  # the first is the one-line synopsis
        first, _, rest = body.partition("\n")
        if kind == "sh":
            if first.startswith("interlock mcp "):
                assert main(shlex.split(first)[1:]) == 0, first
                commands += 1
            continue  # the settings sample: test_the_settings_sample_is_what_the_settings_read
        if first.startswith("# file: "):
            (tmp_path / first.removeprefix("# file: ").strip()).write_text(rest)
            continue
        exec(compile(body, f"{DOC}:sample {ran + 1}", "exec"), namespace)
        ran += 1
    assert (ran, commands) == (5, 2) and "service" in namespace and "cautious" in namespace


def test_the_synopsis_is_what_the_worked_example_does() -> None:
    synopsis = blocks("python")[0]
    assert 'mcp_tools("stdio:python -m billing_server")' in synopsis
    assert 'mcp_tools("stdio:python -m billing_server")' in blocks("python")[2]


def test_the_settings_sample_is_what_the_settings_read(monkeypatch: pytest.MonkeyPatch) -> None:
    [sample] = [b for b in blocks("sh") if b.startswith("export ")]
    for line in sample.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        monkeypatch.setenv(name, shlex.split(value)[0])
    config = McpConfig.from_settings()
    assert config.headers_for("https://mcp.example/mcp") == {"Authorization": "Bearer t0ken"}
    assert (config.timeout, config.connect_timeout) == (20, 30)
    assert (config.max_answer_bytes, config.pins) == (4194304, "/etc/interlock/mcp-pins.json")


def test_headers_may_be_a_file_in_the_secrets_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INTERLOCK_MCP_HEADERS", raising=False)
    (tmp_path / "interlock_mcp_headers").write_text('{"http://h/mcp": {"X-Key": "k"}}')
    monkeypatch.setenv("INTERLOCK_SECRETS_DIR", str(tmp_path))
    assert McpConfig.from_settings().headers_for("http://h/mcp") == {"X-Key": "k"}
