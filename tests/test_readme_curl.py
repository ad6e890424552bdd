"""The README's curl walk-through, run line for line against a live server (dev mode)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.api.app import make_app
from interlock.bootstrap import build_service
from interlock.examples.banking import AGENTS
from interlock.projections import open_read_models
from tests.api.server import ThreadServer

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## The HTTP API by curl"


def _blocks(kind: str) -> str:
    """The first `kind` block of the README's curl section, exactly as a reader sees it."""
    text = README.read_text()
    section = text[text.index(SECTION):]
    found = re.search(rf"```{kind}\n(.*?)```", section, re.S)
    assert found is not None, f"the curl section has no {kind} block"
    return found[1]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    store = f"sqlite:///{tmp_path}/interlock.db"
    service = build_service(store, AGENTS)
    views = open_read_models(service)
    live = ThreadServer(make_app(service, views))  # no keys: dev mode, loopback only
    try:
        yield live.url, store
    finally:
        live.stop()
        views.close()


def test_the_readme_walks_the_http_api_by_curl(server: tuple[str, str], tmp_path: Path) -> None:
    if shutil.which("curl") is None or shutil.which("jq") is None:
        pytest.fail("the walk-through needs curl and jq: apt-get install -y curl jq")
    url, store = server
    # The lines say `.venv/bin/interlock`, as a reader in a checkout writes it: here is one.
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    env = {**os.environ, "URL": url, "STORE": store}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", _blocks("sh")], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    printed = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "CHAT",
                     done.stdout)
    assert printed == _blocks("text")  # what the README says it prints, line for line
