"""The worked examples of docs/approvals.md run, in order, as a reader would run them, and
print what their comments say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "approvals.md"


def _examples() -> list[str]:
    """The Python blocks from "## Stages in order" on (the first block of the page is an
    excerpt of an author's module, not a program)."""
    text = DOC.read_text()
    return re.findall(r"```python\n(.*?)```", text[text.index("## Stages in order"):], re.S)


def test_the_worked_examples_run_and_print_what_they_say(
        capsys: pytest.CaptureFixture[str]) -> None:
    blocks = _examples()
    scope: dict[str, object] = {"__name__": "docs_approvals"}
    printed: list[list[str]] = []
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), scope)
        printed.append(capsys.readouterr().out.splitlines())
    assert printed == [
        ["team lead ['lead']", "treasury", "CFO", "stop"],  # stages
        ["other_stage", "conflicting_roles"],  # segregation
        ["CFO", "dan tina True", "delegation_inactive"],  # delegation
        ["1 proposed", "four_eyes", "passes ['treasury']", "{} 1",  # policies as data
         "wire-limits 2 pia ray", "policy_author", "stop"],
    ]
