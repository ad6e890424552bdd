"""An agent: a system prompt, a model and the tools it may call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from interlock.domain.models import Model, ToolDefinition
from interlock.domain.tools import Tool


@dataclass(frozen=True)
class Agent:
    """`model` is a Model, or a provider string such as "openai:gpt-4.1-mini"."""

    name: str
    system: str
    tools: Sequence[Tool]
    model: Model | str
    max_turns: int = 5
    description: str = ""
    _by_name: dict[str, Tool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {t.name: t for t in self.tools}
        if len(by_name) != len(self.tools):
            raise ValueError(f"agent {self.name}: two tools share a name")
        if self.max_turns < 1:
            raise ValueError(f"agent {self.name}: max_turns must be at least 1")
        object.__setattr__(self, "_by_name", by_name)

    def tool(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    @property
    def tool_map(self) -> dict[str, Tool]:
        return self._by_name

    @cached_property
    def definitions(self) -> list[ToolDefinition]:
        return [t.definition for t in self.tools]
