"""`policy what-if`: a proposed data policy version run against a tool's recorded calls before
anyone approves it. For each call: would it be held, through which stages, and would the
votes recorded on it have passed the version (its quorum per stage, each person in one
stage, never the requester nor the version's authors, and, when the voters' roles are
known, only those who may decide the stage). Pure: the caller reads the chats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.policies import Approval, Decider, normalise_id
from interlock.domain.chat.state import ToolCall
from interlock.domain.policy_book import PolicyDesk
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.tools import SchemaError, Tool

Verdict = Literal["runs", "passes", "fails", "waits", "invalid_input"]
RolesOf = Callable[[str], Decider | None]  # a voter's roles today (None: unknown)


class CallWhatIf(BaseModel):
    """One recorded call under the proposed version."""

    model_config = ConfigDict(frozen=True)

    chat_id: str
    ref: str
    recorded: str  # what happened to it: its status (approved, rejected, completed...)
    was_held: bool
    held: bool  # would the version hold it
    stages: list[str] = []  # the stages it would go through (a staged version)
    verdict: Verdict
    why: str


class WhatIf(BaseModel):
    """The version against the calls read, and the counts."""

    model_config = ConfigDict(frozen=True)

    policy_id: str
    version: int
    agent: str
    tool: str
    calls: list[CallWhatIf]
    counts: dict[str, int]


def _validated(tool: Tool | None, value: Any) -> Any:
    return value if tool is None else tool.validate_input(value)


def _holds(policy: Approval, value: Any) -> tuple[bool, list[bool] | None]:
    """Whether the version holds this input, and which stages apply (fail closed, as the
    hold does: a `when` that fails holds it)."""
    try:
        held = policy.applies(value)
    except Exception:  # noqa: BLE001 - a condition that cannot compare fails closed, as in gating
        held = True
    return held, policy.stages_apply(value)


def judge(chat_id: str, call: ToolCall, policy: Approval, tool: Tool | None,
          authors: set[str], roles_of: RolesOf | None = None) -> CallWhatIf:
    """One recorded call under `policy`: held, its stages, and whether its recorded votes
    (those on the input as requested) would pass."""
    asked = call.original_input if call.original_input is not None else call.input
    base = {"chat_id": chat_id, "ref": call.ref, "recorded": call.status,
            "was_held": call.approval is not None}
    try:
        value = _validated(tool, asked)
    except SchemaError:
        return CallWhatIf(**base, held=False, verdict="invalid_input",
                          why="its input does not validate against the tool now")
    held, applying = _holds(policy, value)
    stage_names = [s.name for s, a in zip(policy.stages, applying or [], strict=False) if a]
    if not held:
        return CallWhatIf(**base, held=False, verdict="runs", why="the version does not hold it")
    verdict, why = _votes_pass(call, policy, applying, sha256_hex(asked), authors, roles_of)
    return CallWhatIf(**base, held=True, stages=stage_names, verdict=verdict, why=why)


def _votes_pass(call: ToolCall, policy: Approval, applying: list[bool] | None, sha: str,
                authors: set[str], roles_of: RolesOf | None) -> tuple[Verdict, str]:
    votes = [v for v in (call.approval.votes if call.approval else [])
             if v.input_sha256 == sha]
    barred = {normalise_id(call.requester)} | authors
    if policy.reject_rejects and any(v.kind == "reject" for v in votes):
        return "fails", "a recorded vote rejects it"
    people = []  # distinct approvers in the order they voted
    for v in votes:
        who = normalise_id(v.for_actor or v.actor)
        if v.kind == "approve" and who not in barred and who not in people:
            people.append(who)
    needs = _stage_needs(policy, applying)
    for name, roles, groups, quorum in needs:
        fit = [p for p in people if _may(roles_of, p, roles, groups)][:quorum]
        if len(fit) < quorum:
            return ("waits" if call.status == "interrupted" else "fails",
                    f"{name}: {len(fit)} of {quorum} approvals by those who may decide it")
        people = [p for p in people if p not in fit]  # nobody in two stages
    return "passes", "its recorded approvals meet every stage"


def _stage_needs(policy: Approval, applying: list[bool] | None
                 ) -> list[tuple[str, set[str], set[str], int]]:
    if not policy.stages:
        d = policy.describe()
        return [("approval", set(d["roles"]), set(d["groups"]), policy.quorum)]
    flags = applying or [True] * len(policy.stages)
    if not any(flags):
        flags = [True] + [False] * (len(flags) - 1)  # none applies: the first, fail closed
    return [(s.name, set(t.roles), set(t.groups), s.quorum)
            for s, a in zip(policy.stages, flags, strict=True) if a for t in [s.terms()]]


def _may(roles_of: RolesOf | None, person: str, roles: set[str], groups: set[str]) -> bool:
    if roles_of is None:
        return True  # the voters' roles are not known: count every approval
    decider = roles_of(person)
    return decider is not None and decider.may_decide(roles, groups)


def summarise(calls: Iterable[CallWhatIf]) -> dict[str, int]:
    """How many were read, would be held, and of each verdict; how many change: held now
    but not then, or then but not now."""
    listed = list(calls)
    counts = {"calls": len(listed), "held": sum(c.held for c in listed),
              "newly_held": sum(c.held and not c.was_held for c in listed),
              "no_longer_held": sum(c.was_held and not c.held for c in listed)}
    for verdict in ("runs", "passes", "fails", "waits", "invalid_input"):
        counts[verdict] = sum(c.verdict == verdict for c in listed)
    return counts


class _Service(Protocol):
    """What a what-if reads of the application (domain/application.py)."""

    events: Any
    sealer: Any

    @property
    def agents(self) -> Mapping[str, Agent]: ...

    def save_stream(self, stream_id: UUID, events: list[Any]) -> int: ...

    def get_chats(self, chat_ids: Sequence[UUID]) -> dict[UUID, Chat]: ...


def what_if(service: _Service, tenant: str, policy_id: str, version: int,
            chat_ids: Callable[[str], Sequence[UUID]], roles_of: RolesOf | None = None
            ) -> WhatIf:
    """Version `version` of the tenant's policy `policy_id` against the calls of its tool
    in the chats `chat_ids(agent)` names (the API and the CLI list them from the chats
    view): the same answer through both."""
    found = PolicyDesk(service).load(tenant).get(policy_id, version)
    policy, agent = found.document.compile(), service.agents.get(found.agent)
    tool = agent.tool(found.tool) if agent is not None else None
    authors = {normalise_id(found.proposed_by)} | (
        {normalise_id(found.approved_by)} if found.approved_by else set())
    judged = [judge(str(chat_id), call, policy, tool, authors, roles_of)
              for chat_id, chat in service.get_chats(chat_ids(found.agent)).items()
              for call in chat.state.calls.values() if call.name == found.tool]
    return WhatIf(policy_id=policy_id, version=version, agent=found.agent, tool=found.tool,
                  calls=judged, counts=summarise(judged))
