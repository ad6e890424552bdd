"""The TypeScript client (clients/typescript) against a live server: its drift check, build
and Node test runner, and `npm pack`."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import Live

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def npm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    npm_path = shutil.which("npm")
    assert npm_path is not None, "Node.js and npm are needed (.ci/run installs them)"
    return subprocess.run([npm_path, *args], cwd=PACKAGE, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def installed() -> None:
    if not (PACKAGE / "node_modules").is_dir():
        done = npm("ci", "--no-audit", "--no-fund")
        assert done.returncode == 0, done.stderr


@pytest.fixture
def server(sqlite_store: str, installed: None) -> Iterator[Live]:
    live = Live(sqlite_store)
    try:
        yield live
    finally:
        live.close()


def test_the_typescript_client_runs_its_tests_against_a_live_server(server: Live) -> None:
    done = npm("test", env={"INTERLOCK_URL": server.url})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "schema.d.ts matches openapi.json" in done.stdout
    assert "# pass 4" in done.stdout and "# fail 0" in done.stdout


def test_the_package_packs(installed: None) -> None:
    done = npm("pack", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    assert '"dist/index.js"' in done.stdout and '"dist/index.d.ts"' in done.stdout
