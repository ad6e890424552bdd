"""docs/replay.md runs as written: its Python samples in order, its `interlock` lines."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from interlock.cli.main import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "replay.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def _blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(DOC.read_text()) if lang == kind]


def test_every_sample_of_docs_replay_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "docs_replay"}
    python = _blocks("python")
    assert len(python) == 4
    for block in python:
        exec(compile(block, str(DOC), "exec"), namespace)
    assert "1 different (policy_changed 1)" in capsys.readouterr().out
    commands = [line for block in _blocks("sh") for line in block.splitlines() if line]
    assert len(commands) == 2
    for line in commands:
        argv = shlex.split(line.replace("$STORE", namespace["store"]))
        assert argv[0] == "interlock"
        assert main(argv[1:]) == 0, line
    assert (tmp_path / "junit.xml").is_file()
