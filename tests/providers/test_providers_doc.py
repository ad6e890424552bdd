"""Every Python sample of docs/providers.md runs (a constructor argument that does not exist
fails here, not in a reader's hands)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def test_every_python_sample_of_docs_providers_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    monkeypatch.chdir(tmp_path)  # the samples' sqlite file lands here
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {"__name__": "docs_providers"})
