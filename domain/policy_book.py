"""Policies as data: a tenant's risk team changes who approves a tool's calls without a deploy,
under four eyes.

A tenant's data policies are one stream (like its delegations, domain/delegations.py): each
version proposed, approved or withdrawn is an event, chained like a chat's. A version is
proposed by one person holding a policy role (`policy_admin`, or `admin`), approved by
another (never its proposer: `four_eyes`), and in force from its `effective_from` (or its
approval, if later) until it is withdrawn or a later version of the same policy is in force.

One policy (an id) governs one agent's tool. While a version is in force it wins over the
agent's code policy for that tool: the code is what a deploy ships, the data is what the
tenant's second line decided since, under four eyes and recorded (docs/approvals.md).

A document is data all through: roles, quorum, spans, stages, and `when` conditions in a
small language of their own (`Condition`), never code: a path into the call's validated
input compared with a value, combined by all/any/not.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel, ConfigDict, Field, computed_field

from interlock.domain.chat.events import ChatEvent, now
from interlock.domain.chat.policies import Approval, Decider, PolicyRef, normalise_id
from interlock.domain.chat.stages import Stage
from interlock.domain.errors import (
    ForbiddenError,
    FourEyesError,
    InvalidPolicyError,
    InvalidRequestError,
    PolicyNotFoundError,
    PolicyStateError,
)
from interlock.domain.streams import Stream, StreamEvent, StreamStore

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
POLICY_ROLES = frozenset({"policy_admin", "admin"})
OPS = ("==", "!=", ">", ">=", "<", "<=", "in", "not_in", "exists")
MAX_DEPTH, MAX_NODES = 8, 100


@functools.lru_cache(maxsize=1024)  # asked at every hold: uuid5 runs SHA-1 and UUID in Python
def policies_id(tenant: str) -> UUID:
    """The stream of a tenant's data policies."""
    return uuid5(NAMESPACE_URL, f"interlock:policies:{tenant}")


# -- the condition language ---------------------------------------------------------------

class ConditionError(ValueError):
    """A condition met an input it cannot compare (a text against a number): the callers
    of `when` fail closed (the call is held, the stage kept)."""


def check_condition(node: Any, where: str = "when") -> None:
    """Refuse a condition that is not the language's, naming the bad part
    (`stages[1].when.all[0].op`)."""
    count = [0]

    def walk(n: Any, at: str, depth: int) -> None:
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_NODES:
            raise InvalidPolicyError(at, f"a condition nests at most {MAX_DEPTH} deep and has"
                                         f" at most {MAX_NODES} parts")
        if not isinstance(n, dict):
            raise InvalidPolicyError(at, "a condition is an object: {path, op, value}, "
                                         "{all: [...]}, {any: [...]} or {not: {...}}")
        for key in ("all", "any"):
            if key in n:
                if set(n) != {key}:
                    raise InvalidPolicyError(at, f"{key} stands alone, not with"
                                                 f" {sorted(set(n) - {key})}")
                parts = n[key]
                if not isinstance(parts, list) or not parts:
                    raise InvalidPolicyError(f"{at}.{key}", "a non-empty list of conditions")
                for i, part in enumerate(parts):
                    walk(part, f"{at}.{key}[{i}]", depth + 1)
                return
        if "not" in n:
            if set(n) != {"not"}:
                others = sorted(set(n) - {"not"})
                raise InvalidPolicyError(at, f"not stands alone, not with {others}")
            walk(n["not"], f"{at}.not", depth + 1)
            return
        _check_leaf(n, at)

    walk(node, where, 0)


def _check_leaf(n: dict[str, Any], at: str) -> None:
    unknown = sorted(set(n) - {"path", "op", "value"})
    if unknown:
        raise InvalidPolicyError(at, f"unknown keys {unknown}: a comparison has path, op"
                                     " and value")
    path = n.get("path")
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise InvalidPolicyError(f"{at}.path", "a dotted path into the input, as"
                                               " \"amount\" or \"payee.country\"")
    op = n.get("op")
    if op not in OPS:
        raise InvalidPolicyError(f"{at}.op", f"{op!r} is not one of {', '.join(OPS)}")
    if op == "exists":
        if "value" in n:
            raise InvalidPolicyError(f"{at}.value", "exists takes no value")
        return
    if "value" not in n:
        raise InvalidPolicyError(f"{at}.value", f"{op} needs a value")
    value = n["value"]
    if op in ("in", "not_in"):
        if not isinstance(value, list) or not all(_scalar(v) for v in value):
            raise InvalidPolicyError(f"{at}.value", f"{op} takes a list of numbers, texts"
                                                    " or booleans")
    elif not _scalar(value):
        raise InvalidPolicyError(f"{at}.value", "a number, a text, a boolean or null")
    elif op in (">", ">=", "<", "<=") and (value is None or isinstance(value, bool)):
        raise InvalidPolicyError(f"{at}.value", f"{op} compares numbers or texts")


def _scalar(v: Any) -> bool:
    if isinstance(v, float) and not math.isfinite(v):
        return False
    return v is None or isinstance(v, str | int | float | bool)


_MISSING = object()


def _at(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def evaluate(node: Mapping[str, Any], value: Any) -> bool:
    """Whether `value` (a validated input) meets the checked condition `node`. A missing
    path meets nothing but `not` of it; values of different kinds compared by order raise
    ConditionError (the callers fail closed)."""
    if "all" in node:
        return all(evaluate(n, value) for n in node["all"])
    if "any" in node:
        return any(evaluate(n, value) for n in node["any"])
    if "not" in node:
        return not evaluate(node["not"], value)
    found, op, want = _at(value, node["path"]), node["op"], node.get("value")
    if op == "exists":
        return found is not _MISSING and found is not None
    if found is _MISSING:
        return False
    if op in ("==", "!="):
        same = found == want and (_number(found) == _number(want))
        return same if op == "==" else not same
    if op in ("in", "not_in"):
        inside = any(found == w and _number(found) == _number(w) for w in want or ())
        return inside if op == "in" else not inside
    if not ((_number(found) and _number(want)) or (isinstance(found, str)
                                                   and isinstance(want, str))):
        raise ConditionError(f"{node['path']} is {found!r}: {op} {want!r} cannot compare them")
    return bool({">": found > want, ">=": found >= want, "<": found < want,
                 "<=": found <= want}[op])


class Condition:
    """A checked condition as an `Approval`'s or a `Stage`'s `when`; its `__qualname__` (what
    the log records of a `when`) is the condition itself, as JSON."""

    def __init__(self, node: Mapping[str, Any]) -> None:
        self.node = dict(node)
        self.__qualname__ = "when " + json.dumps(self.node, sort_keys=True,
                                                 separators=(",", ":"))

    def __call__(self, value: Any) -> bool:
        return evaluate(self.node, value)


# -- the document -------------------------------------------------------------------------

Names = list[str]
Seconds = float


class Deciders(BaseModel):
    """Who decides, how many of them, and by when: what a policy and each of its stages say
    alike."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    roles: Names = Field(default_factory=list, max_length=50)
    groups: Names = Field(default_factory=list, max_length=50)
    quorum: int = Field(1, ge=1, le=50)
    expires_in: Seconds | None = Field(None, gt=0, le=366 * 86400)
    escalate_after: Seconds | None = Field(None, gt=0, le=366 * 86400)
    escalate_to: Names = Field(default_factory=list, max_length=50)
    escalate_to_groups: Names = Field(default_factory=list, max_length=50)


class StageDocument(Deciders):
    """One stage of a data policy: who decides it, how many, by when after it opens; `when`
    (a condition) skips it when false."""

    name: str = Field(min_length=1, max_length=100)
    when: dict[str, Any] | None = None


class PolicyDocument(Deciders):
    """An approval policy as data: what `Approval` declares in code, `when` a condition."""

    reject_rejects: bool = True
    conflicts: list[Names] = Field(default_factory=list, max_length=50)
    stages: list[StageDocument] = Field(default_factory=list, max_length=10)
    when: dict[str, Any] | None = None

    def compile(self) -> Approval:
        """The `Approval` this document declares; refused (InvalidPolicyError, naming the
        part) when its conditions are not the language's or its parts contradict."""
        if self.when is not None:
            check_condition(self.when, "when")
        for i, stage in enumerate(self.stages):
            if stage.when is not None:
                check_condition(stage.when, f"stages[{i}].when")
        try:
            stages = [_stage(s, f"stages[{i}]") for i, s in enumerate(self.stages)]
            return Approval(
                when=None if self.when is None else Condition(self.when),
                roles=self.roles, groups=self.groups, quorum=self.quorum,
                expires_in=_span(self.expires_in), escalate_after=_span(self.escalate_after),
                escalate_to=self.escalate_to, escalate_to_groups=self.escalate_to_groups,
                reject_rejects=self.reject_rejects, stages=stages, conflicts=self.conflicts)
        except InvalidPolicyError:
            raise
        except ValueError as exc:  # Approval's own checks: a contradiction of its parts
            raise InvalidPolicyError("document", str(exc).removeprefix("Approval: ")) from None


def _span(s: float | None) -> timedelta | None:
    return None if s is None else timedelta(seconds=s)


def _stage(s: StageDocument, where: str) -> Stage:
    try:
        return Stage(s.name, roles=s.roles, groups=s.groups, quorum=s.quorum,
                     when=None if s.when is None else Condition(s.when),
                     expires_in=_span(s.expires_in), escalate_after=_span(s.escalate_after),
                     escalate_to=s.escalate_to, escalate_to_groups=s.escalate_to_groups)
    except ValueError as exc:
        raise InvalidPolicyError(where, str(exc)) from None


# -- events and the stream ----------------------------------------------------------------

class PolicyProposed(StreamEvent):
    """`proposed_by` proposed version `version` of policy `policy_id`, for `agent`'s `tool`,
    in force from `effective_from` once approved by someone else."""

    tenant: str
    policy_id: str
    version: int
    agent: str
    tool: str
    document: dict[str, Any]
    effective_from: datetime
    proposed_by: str
    reason: str


class PolicyApproved(StreamEvent):
    """A second person approved the version: it is in force from its effective time."""

    tenant: str
    policy_id: str
    version: int
    approved_by: str
    reason: str | None = None


class PolicyWithdrawn(StreamEvent):
    """The version is no longer proposed, or no longer in force, from now."""

    tenant: str
    policy_id: str
    version: int
    withdrawn_by: str
    reason: str


class PolicyVersion(BaseModel):
    """One version of a data policy as the API shows it."""

    model_config = ConfigDict(frozen=True)

    id: str
    version: int
    agent: str
    tool: str
    document: PolicyDocument
    effective_from: datetime
    proposed_by: str
    proposed_at: datetime
    reason: str
    approved_by: str | None = None
    approved_at: datetime | None = None
    withdrawn_by: str | None = None
    withdrawn_at: datetime | None = None
    withdraw_reason: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def state(self) -> Literal["proposed", "approved", "withdrawn"]:
        if self.withdrawn_at is not None:
            return "withdrawn"
        return "approved" if self.approved_at is not None else "proposed"

    def in_force(self, at: datetime) -> bool:
        """Approved, not withdrawn (by `at`), and effective by `at`."""
        return (self.approved_at is not None and self.approved_at <= at
                and self.effective_from <= at
                and (self.withdrawn_at is None or at < self.withdrawn_at))

    def ref(self) -> PolicyRef:
        assert self.approved_by is not None
        return PolicyRef(id=self.id, version=self.version, proposed_by=self.proposed_by,
                         approved_by=self.approved_by)


class PolicyProposal(BaseModel):
    """Propose version n+1 of policy `id` (a new id: version 1) for `agent`'s `tool`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=NAME)
    agent: str = Field(min_length=1, max_length=200)
    tool: str = Field(min_length=1, max_length=200)
    document: PolicyDocument
    effective_from: datetime | None = None  # omitted: as soon as it is approved
    reason: str = Field(min_length=1, max_length=2000)


class Decision(BaseModel):
    """An approval or a withdrawal of a version, with why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str | None = Field(None, max_length=2000)


class InForce(NamedTuple):
    """A tool's data policy at one moment: the compiled policy and the version it is."""

    approval: Approval
    ref: PolicyRef


def _risk(who: Decider, doing: str) -> None:
    if not who.roles & POLICY_ROLES:
        raise ForbiddenError(f"{who.id} may not {doing} a policy: it needs the role"
                             " policy_admin", actor=who.id, reason="not_a_policy_admin")


class PolicyBook(Stream):
    """A tenant's data policies, replayed from their events."""

    def __init__(self, tenant: str) -> None:
        super().__init__()
        self.tenant, self.id = tenant, policies_id(tenant)
        self.versions: dict[str, list[PolicyVersion]] = {}

    def propose(self, who: Decider, proposal: PolicyProposal, at: datetime,
                tools: Mapping[str, Iterable[str]] | None = None) -> PolicyVersion:
        """Record a proposed version; refused without a policy role, for an agent or tool
        `tools` (agent name to tool names) does not know, or a document that does not
        compile."""
        _risk(who, "propose")
        if tools is not None:
            if proposal.agent not in tools:
                raise InvalidPolicyError("agent", f"no agent named {proposal.agent!r}")
            if proposal.tool not in set(tools[proposal.agent]):
                raise InvalidPolicyError("tool", f"agent {proposal.agent} has no tool"
                                                 f" {proposal.tool!r}")
        proposal.document.compile()
        governs = self.governing(proposal.agent, proposal.tool)
        if governs is not None and governs != proposal.id:
            raise InvalidPolicyError("id", f"policy {governs} governs {proposal.agent}."
                                           f"{proposal.tool}: propose a version of it")
        earlier = self.versions.get(proposal.id, [])
        if earlier and (earlier[0].agent, earlier[0].tool) != (proposal.agent, proposal.tool):
            raise InvalidPolicyError("id", f"policy {proposal.id} governs {earlier[0].agent}."
                                           f"{earlier[0].tool}, not {proposal.agent}."
                                           f"{proposal.tool}")
        version = len(earlier) + 1
        self._record(PolicyProposed(
            originator_id=self.id, originator_version=self.version + 1, timestamp=now(),
            tenant=self.tenant, policy_id=proposal.id, version=version, agent=proposal.agent,
            tool=proposal.tool, document=proposal.document.model_dump(mode="json"),
            effective_from=proposal.effective_from or at, proposed_by=who.id,
            reason=proposal.reason))
        return self.get(proposal.id, version)

    def approve(self, policy_id: str, version: int, who: Decider,
                reason: str | None = None) -> PolicyVersion:
        """A second person's yes: never the proposer's (four eyes)."""
        _risk(who, "approve")
        found = self.get(policy_id, version)
        if normalise_id(who.id) == normalise_id(found.proposed_by):
            raise FourEyesError(policy_id, version, who.id)
        if found.state != "proposed":
            raise PolicyStateError(policy_id, version, found.state, "approved")
        self._record(PolicyApproved(
            originator_id=self.id, originator_version=self.version + 1, timestamp=now(),
            tenant=self.tenant, policy_id=policy_id, version=version, approved_by=who.id,
            reason=reason))
        return self.get(policy_id, version)

    def withdraw(self, policy_id: str, version: int, who: Decider,
                 reason: str) -> PolicyVersion:
        """Take a version back (its proposer, or a policy role): proposed, it never comes
        into force; in force, it ends now (calls held under it keep it)."""
        found = self.get(policy_id, version)
        if normalise_id(who.id) != normalise_id(found.proposed_by):
            _risk(who, "withdraw")
        if found.state == "withdrawn":
            raise PolicyStateError(policy_id, version, found.state, "withdrawn")
        self._record(PolicyWithdrawn(
            originator_id=self.id, originator_version=self.version + 1, timestamp=now(),
            tenant=self.tenant, policy_id=policy_id, version=version, withdrawn_by=who.id,
            reason=reason))
        return self.get(policy_id, version)

    def get(self, policy_id: str, version: int | None = None) -> PolicyVersion:
        versions = self.versions.get(policy_id)
        if not versions:
            raise PolicyNotFoundError(policy_id, version)
        if version is None:
            return versions[-1]
        if not 1 <= version <= len(versions):
            raise PolicyNotFoundError(policy_id, version)
        return versions[version - 1]

    def governing(self, agent: str, tool: str) -> str | None:
        """The id of the policy of `agent`'s `tool`, if it has one."""
        return next((pid for pid, vs in self.versions.items()
                     if (vs[0].agent, vs[0].tool) == (agent, tool)), None)

    def in_force(self, agent: str, at: datetime) -> dict[str, InForce]:
        """`agent`'s tools' data policies in force at `at`, by tool name: of each policy,
        the latest version in force."""
        found = {}
        for versions in self.versions.values():
            if versions[0].agent != agent:
                continue
            live = [v for v in versions if v.in_force(at)]
            if live:
                v = live[-1]
                found[v.tool] = InForce(approval=v.document.compile(), ref=v.ref())
        return found

    def recorded(self, ref: PolicyRef) -> Approval | None:
        """The compiled version a call was held under (None: not in this book)."""
        versions = self.versions.get(ref.id, [])
        return versions[ref.version - 1].document.compile() if ref.version <= len(versions) \
            else None

    def all_versions(self) -> list[PolicyVersion]:
        return [v for vs in self.versions.values() for v in vs]

    def _record(self, event: ChatEvent) -> None:
        self.apply(event)
        self.pending_events.append(event)

    def apply(self, event: ChatEvent) -> None:
        if isinstance(event, PolicyProposed):
            self.versions.setdefault(event.policy_id, []).append(PolicyVersion(
                id=event.policy_id, version=event.version, agent=event.agent, tool=event.tool,
                document=PolicyDocument.model_validate(event.document),
                effective_from=event.effective_from, proposed_by=event.proposed_by,
                proposed_at=event.timestamp, reason=event.reason))
        elif isinstance(event, PolicyApproved):
            self._change(event.policy_id, event.version, approved_by=event.approved_by,
                         approved_at=event.timestamp)
        elif isinstance(event, PolicyWithdrawn):
            self._change(event.policy_id, event.version, withdrawn_by=event.withdrawn_by,
                         withdrawn_at=event.timestamp, withdraw_reason=event.reason)
        self._followed(event)

    def _change(self, policy_id: str, version: int, **update: Any) -> None:
        versions = self.versions[policy_id]
        versions[version - 1] = versions[version - 1].model_copy(update=update)


def load(events: Any, tenant: str) -> PolicyBook:
    """The tenant's data policies from the store's events (`Application.events`)."""
    return replay(tenant, events.get(policies_id(tenant)))


def replay(tenant: str, events: Iterable[object]) -> PolicyBook:
    """The tenant's data policies as recorded."""
    book = PolicyBook(tenant)
    for event in events:
        if isinstance(event, PolicyProposed | PolicyApproved | PolicyWithdrawn) \
                and event.tenant == tenant:
            book.apply(event)
    return book


class PolicyDesk:
    """The use cases of data policies: propose, approve, withdraw, read, and what is in force."""

    def __init__(self, service: StreamStore, tools: Mapping[str, Iterable[str]] | None = None
                 ) -> None:
        self.service, self.tools = service, tools

    def load(self, tenant: str) -> PolicyBook:
        return load(self.service.events, tenant)

    def propose(self, tenant: str, who: Decider, proposal: PolicyProposal) -> PolicyVersion:
        if proposal.effective_from is not None and proposal.effective_from.tzinfo is None:
            raise InvalidRequestError("effective_from needs a time zone",
                                      reason="naive_time")
        book = self.load(tenant)
        version = book.propose(who, proposal, now(), self.tools)
        self._save(book)
        return version

    def approve(self, tenant: str, policy_id: str, version: int, who: Decider,
                reason: str | None = None) -> PolicyVersion:
        book = self.load(tenant)
        found = book.approve(policy_id, version, who, reason)
        self._save(book)
        return found

    def withdraw(self, tenant: str, policy_id: str, version: int, who: Decider,
                 reason: str) -> PolicyVersion:
        book = self.load(tenant)
        found = book.withdraw(policy_id, version, who, reason)
        self._save(book)
        return found

    def in_force(self, tenant: str, agent: str, at: datetime) -> dict[str, InForce]:
        return self.load(tenant).in_force(agent, at)

    def _save(self, book: PolicyBook) -> None:
        self.service.save_stream(book.id, book.seal(self.service.sealer.sign))
