"""Every code block of the README and docs/*.md runs, is checked, or says why not, so drift
fails here.

A block is one of:
- marked `<!-- run: tests/….py -->` on the line before it: that test runs it (the file must
  exist and name the page, or quote the block's first line);
- marked `<!-- not run: why -->`: it cannot run here (needs Ollama, is a grammar), and says so;
- unmarked `python`: run here, a page's blocks in order in one namespace, in a scratch
  directory, with `URL` naming a live dev server (`--dev-principals
  alice,tina:treasury,tom:treasury`, the banking agents);
- unmarked `json`, `toml`: parsed; unmarked `filter`: each line parsed by the review filter
  language.
Anything else unmarked fails. Links between pages must land on a file of the repository.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from interlock.api.app import make_app
from interlock.api.dev_principals import dev_auth
from interlock.bootstrap import build_service
from interlock.domain.review.filters import parse
from interlock.examples.banking import AGENTS
from interlock.projections import open_read_models
from tests.api.server import ThreadServer

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARK = re.compile(r"^\s*<!--\s*(run|not run):\s*(.+?)\s*-->\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PARSED = {"json": json.loads, "toml": tomllib.loads}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, from 1
    lang: str
    text: str
    mark: tuple[str, str] | None  # ("run", test file) or ("not run", why)

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line} ({self.lang or 'no language'})"


def blocks(page: Path) -> list[Block]:
    lines, found, i = page.read_text().splitlines(), [], 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if FENCE.match(lines[j]))
        indent = len(opened[1])
        body = "\n".join(line[indent:] for line in lines[i + 1:end]) + "\n"
        mark = MARK.match(lines[i - 1]) if i else None
        found.append(Block(page, i + 1, opened[2], body,
                           (mark[1], mark[2]) if mark else None))
        i = end + 1
    return found


ALL = [b for page in PAGES for b in blocks(page)]


def test_every_block_runs_is_checked_or_says_why_not() -> None:
    unmarked = [str(b) for b in ALL
                if b.mark is None and b.lang not in {"python", "filter", *PARSED}]
    assert unmarked == [], "mark each with <!-- run: tests/….py --> or <!-- not run: why -->"


def test_a_block_run_elsewhere_names_a_test_that_reads_its_page() -> None:
    wrong = []
    for b in (b for b in ALL if b.mark is not None and b.mark[0] == "run"):
        test = ROOT / b.mark[1]
        text = test.read_text() if test.is_file() else ""
        first = b.text.strip().splitlines()[0]
        if not (b.page.name in text or b.page.stem in text or first in text):
            wrong.append(f"{b}: {b.mark[1]}")
    assert wrong == []


@pytest.mark.parametrize("block", [b for b in ALL if b.mark is None and b.lang in PARSED],
                         ids=str)
def test_data_blocks_parse(block: Block) -> None:
    PARSED[block.lang](block.text)


@pytest.mark.parametrize("block", [b for b in ALL if b.mark is None and b.lang == "filter"],
                         ids=str)
def test_filter_examples_parse(block: Block) -> None:
    for line in block.text.strip().splitlines():
        parse(line)


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[str]:
    """`interlock serve --dev-principals alice,tina:treasury,tom:treasury`, in process."""
    service = build_service(f"sqlite:///{tmp_path / 'interlock.db'}", AGENTS)
    views = open_read_models(service)
    server = ThreadServer(make_app(service, views, dev_auth("alice,tina:treasury,tom:treasury")))
    try:
        yield server.url
    finally:
        server.stop()
        views.close()


RUN = sorted({b.page for b in ALL if b.mark is None and b.lang == "python"})


@pytest.mark.parametrize("page", RUN, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run_in_order(
    page: Path, dev_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("URL", dev_server)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for b in (b for b in blocks(page) if b.mark is None and b.lang == "python"):
        exec(compile(b.text, str(b), "exec"), namespace)  # the page's own code
    if page.name == "README.md":  # the policy sample: two treasurers approve, it runs
        assert capsys.readouterr().out.startswith("Done.")


def test_links_between_pages_land_on_files_of_the_repository() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                if page.name == "README.md" and not target.startswith("#"):
                    broken.append(f"{page.name}: {target} leaves the repository")
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists() or ROOT not in path.parents:
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
