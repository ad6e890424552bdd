"""The wheel installs one import root, `interlock`, with the public names a user writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHECK = """
import importlib, interlock
from interlock import (Agent, FunctionModel, Message, ModelRequest, ModelResponse, Part,
                       ToolContext, tool)
from interlock.client import AsyncClient, Client
print(interlock.__file__)
for name in ("domain", "api", "projections", "providers", "stores", "cli", "examples", "bench",
             "tests"):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        continue
    print("importable:", name)
"""


def test_the_wheel_installs_only_interlock(tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    top = {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")}
    assert top - {"bin"} == {"interlock"}
    out = subprocess.run(
        [sys.executable, "-P", "-c", CHECK],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert out == [str(site / "interlock" / "__init__.py")]
    ui = site / "interlock" / "api" / "ui"  # the console's templates and assets ship too
    assert (ui / "templates" / "interrupt.html").is_file()
    assert (ui / "static" / "console.js").is_file()
