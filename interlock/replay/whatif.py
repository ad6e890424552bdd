"""Policy what-if: of the recorded tool calls, which new policies would hold, release, route
to other roles or ask another quorum of, counted by agent and tool, with examples.

A call is judged as the turn loop's gate judges it (`interlock.domain.runtime.gating`): the
tool's policy applies when its `when` holds for the validated input; an input that does not
validate is not held (it fails when it runs); a `when` that raises holds (fail closed).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from interlock.domain.application import Interlock
from interlock.domain.chat import approval_events as ae
from interlock.domain.chat import events as ev
from interlock.domain.chat.policies import ApprovalTerms
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.tools import SchemaError
from interlock.replay.source import Selection, pages

Change = Literal["held", "released", "routed", "quorum", "unchanged"]
CHANGES: tuple[Change, ...] = ("held", "released", "routed", "quorum", "unchanged")
EXAMPLES = 3  # per agent, tool and change


class Example(BaseModel):
    chat_id: str
    ref: str
    input: Any
    recorded: dict[str, Any] | None  # the terms it was held on, None: it was not held
    new: dict[str, Any] | None


class ToolChanges(BaseModel):
    agent: str
    tool: str
    counts: dict[Change, int]
    examples: dict[Change, list[Example]] = {}


class WhatIf(BaseModel):
    calls: int = 0
    tools: list[ToolChanges] = []
    missing_agents: list[str] = []  # recorded agents the new version does not have

    def changed(self) -> int:
        return sum(n for t in self.tools for c, n in t.counts.items() if c != "unchanged")


def would_hold(agent: Agent, name: str, input: Any) -> bool:
    """Whether `agent`'s policy holds a call of `name` with `input` (as the gate decides)."""
    policy, tool = agent.policy(name), agent.tool(name)
    if policy is None or tool is None:
        return False
    try:
        value = tool.validate_input(input)
    except SchemaError:
        return False
    try:
        return policy.applies(value)
    except Exception:  # noqa: BLE001 - the author's `when` failed: fail closed, as the gate does
        return True


def _terms(terms: ApprovalTerms | None) -> dict[str, Any] | None:
    if terms is None:
        return None
    return {"roles": terms.roles, "groups": terms.groups, "quorum": terms.quorum}


def change_of(recorded: dict[str, Any] | None, new: dict[str, Any] | None) -> Change:
    if (recorded is None) != (new is None):
        return "held" if recorded is None else "released"
    if recorded is None or new is None:
        return "unchanged"
    if (recorded["roles"], recorded["groups"]) != (new["roles"], new["groups"]):
        return "routed"
    return "quorum" if recorded["quorum"] != new["quorum"] else "unchanged"


class _Tally:
    def __init__(self, agents: Sequence[Agent]) -> None:
        self.agents = {a.name: a for a in agents}
        self.counts: dict[tuple[str, str], Counter[Change]] = {}
        self.examples: dict[tuple[str, str], dict[Change, list[Example]]] = {}
        self.missing: set[str] = set()
        self.calls = 0

    def chat(self, events: Sequence[ev.ChatEvent]) -> None:
        started = events[0]
        assert isinstance(started, ev.ChatStarted)
        agent = self.agents.get(started.agent)
        if agent is None:
            self.missing.add(started.agent)
            return
        held = {e.ref: e.terms for e in events if isinstance(e, ae.ApprovalRequested)}
        for e in ev.requested_calls(events):
            if isinstance(e, ev.ToolRequested):
                self._call(agent, started, e, held.get(e.ref))

    def _call(self, agent: Agent, started: ev.ChatStarted, call: ev.ToolRequested,
              held: ApprovalTerms | None) -> None:
        self.calls += 1
        policy = agent.policy(call.name)
        new = policy.terms(call.timestamp, started.actor) if policy and would_hold(
            agent, call.name, call.input) else None
        recorded, now = _terms(held), _terms(new)
        change = change_of(recorded, now)
        key = (agent.name, call.name)
        self.counts.setdefault(key, Counter())[change] += 1
        shown = self.examples.setdefault(key, {}).setdefault(change, [])
        if change != "unchanged" and len(shown) < EXAMPLES:
            shown.append(Example(chat_id=str(call.originator_id), ref=call.ref,
                                 input=call.input, recorded=recorded, new=now))

    def result(self) -> WhatIf:
        tools = [ToolChanges(agent=a, tool=t, counts={c: n[c] for c in CHANGES},
                             examples={c: x for c, x in self.examples[a, t].items() if x})
                 for (a, t), n in sorted(self.counts.items())]
        return WhatIf(calls=self.calls, tools=tools, missing_agents=sorted(self.missing))


def what_if(recorded: Interlock, agents: Sequence[Agent],
            selection: Selection | None = None) -> WhatIf:
    """Judge every recorded tool call of the selected chats under `agents`' policies."""
    tally = _Tally(agents)
    for page in pages(recorded, selection or Selection()):
        for events in page:
            if events:
                tally.chat(events)
    return tally.result()


def held_text(terms: dict[str, Any] | None) -> str:
    """Terms as people say them: `held for treasury or group finance, 2 approvals`."""
    if terms is None:
        return "not held"
    who = " or ".join([*terms["roles"], *(f"group {g}" for g in terms["groups"])])
    quorum = terms["quorum"]
    return f"held for {who or 'anyone'}, {quorum} approval{'s' * (quorum > 1)}"


def table(result: WhatIf) -> Iterable[str]:
    """The what-if as lines of text: one row per agent and tool, then the examples."""
    yield f"{'agent':<24} {'tool':<20} " + " ".join(f"{c:>9}" for c in CHANGES)
    for row in result.tools:
        yield f"{row.agent:<24} {row.tool:<20} " + " ".join(
            f"{row.counts[c]:>9}" for c in CHANGES)
    for row in result.tools:
        for change, examples in row.examples.items():
            for x in examples:
                yield (f"  {change}: {row.agent}/{row.tool} chat {x.chat_id} {x.ref} input "
                       f"{json.dumps(x.input, ensure_ascii=False)}: was {held_text(x.recorded)},"
                       f" now {held_text(x.new)}")
    if result.missing_agents:
        yield "not judged (no such agent in the new version): " + ", ".join(
            result.missing_agents)
