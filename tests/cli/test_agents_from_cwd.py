"""`interlock serve --agents mymodule:AGENTS` finds a module in the current folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from interlock.bootstrap import load_agents

MODULE = '''
from interlock import Agent, FunctionModel, Message, ModelResponse, Part

def script(request):
    return ModelResponse(message=Message(role="model", content=[Part(text="hi")]))

AGENTS = [Agent(name="localAgent", system="Says hi.", tools=[],
                model=FunctionModel(script, name="local"))]
'''


def test_a_module_in_the_current_folder_loads_without_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_local_agents.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_local_agents", raising=False)
    [agent] = load_agents("my_local_agents:AGENTS")
    assert agent.name == "localAgent"
