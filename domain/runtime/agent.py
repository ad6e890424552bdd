"""An agent: a system prompt, a model and the tools it may call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.policies import Approval, ToolMatch
from interlock.domain.runtime.middleware import ToolMiddleware
from interlock.domain.runtime.models import Model, ToolDefinition
from interlock.domain.runtime.tools import Tool


@dataclass(frozen=True)
class Agent:
    """`model` is a Model, or a provider string such as "openai:gpt-4.1-mini".

    `approvals` maps tool names to policies; one here overrides the tool's own `approval`.
    A key may also be a `ToolMatch` (tools by MCP server and name, or by annotation; the
    first that matches applies after names), and a value None runs a tool without one.
    `tool_middleware` wraps every call of its tools, the first outermost (see
    `interlock.domain.runtime.middleware`); a held call is decided before it runs.
    """

    name: str
    system: str
    tools: Sequence[Tool]
    model: Model | str
    max_turns: int = 5
    description: str = ""
    approvals: Mapping[str | ToolMatch, Approval | None] = field(default_factory=dict)
    tool_middleware: Sequence[ToolMiddleware] = ()
    _by_name: dict[str, Tool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {t.name: t for t in self.tools}
        if len(by_name) != len(self.tools):
            raise ValueError(f"agent {self.name}: two tools share a name")
        if self.max_turns < 1:
            raise ValueError(f"agent {self.name}: max_turns must be at least 1")
        unknown = sorted(set(_names(self.approvals)) - set(by_name))
        if unknown:
            raise ValueError(f"agent {self.name}: approvals name unknown tools {unknown}")
        for match in _matches(self.approvals):
            if not any(_matched(match, t) for t in self.tools):
                raise ValueError(f"agent {self.name}: approvals match no tool: {match}")
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "tool_middleware", tuple(self.tool_middleware))

    def policy(self, name: str) -> Approval | None:
        """The approval policy a tool's calls are held under, if any."""
        tool = self._by_name.get(name)
        if name in self.approvals:
            return self.approvals[name]
        if tool is None:
            return None
        for match in _matches(self.approvals):
            if _matched(match, tool):
                return self.approvals[match]
        return tool.approval

    @cached_property
    def fingerprint(self) -> str:
        """A hash of what decides behaviour: prompt, model id, tools, schemas and policies."""
        return sha256_hex(self.described())

    def described(self) -> dict[str, object]:
        """What the fingerprint hashes; an audit keeps it to read which server version
        (an MCP tool's provenance) a decision was made against."""
        model = self.model if isinstance(self.model, str) else self.model.name
        tools = [{**t.definition.model_dump(mode="json"),
                  "approval": p.describe() if (p := self.policy(t.name)) else None,
                  **_declared(t)}
                 for t in self.tools]
        described: dict[str, object] = {"system": self.system, "model": model, "tools": tools}
        if self.tool_middleware:  # only then: the fingerprints of existing agents stay as they were
            described["tool_middleware"] = [_qualname(m) for m in self.tool_middleware]
        return described

    def tool(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    @property
    def tool_map(self) -> dict[str, Tool]:
        return self._by_name

    @cached_property
    def definitions(self) -> list[ToolDefinition]:
        return [t.definition for t in self.tools]


def _names(approvals: Mapping[str | ToolMatch, Approval | None]) -> list[str]:
    return [k for k in approvals if isinstance(k, str)]


def _matches(approvals: Mapping[str | ToolMatch, Approval | None]) -> list[ToolMatch]:
    return [k for k in approvals if isinstance(k, ToolMatch)]


def _matched(match: ToolMatch, tool: Tool) -> bool:
    return match.matches(tool.name, tool.provenance, tool.annotations)


def _declared(tool: Tool) -> dict[str, object]:
    """A tool's annotations and provenance, only when it has them: the fingerprints of
    agents without such tools stay as they were."""
    found: dict[str, object] = {}
    if tool.annotations:
        found["annotations"] = dict(tool.annotations)
    if tool.provenance:
        found["provenance"] = dict(tool.provenance)
    return found


def _qualname(middleware: ToolMiddleware) -> str:
    owner = getattr(middleware, "__qualname__", None) or type(middleware).__qualname__
    return f"{getattr(middleware, '__module__', '')}.{owner}"
