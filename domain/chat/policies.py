"""Approval policies: which calls need a yes, who may give it, how many, by when.

`Approval` is what an author declares (with `when`, a function); `ApprovalTerms` is what
the log records when a call is held for approval (the policy without the function, with
its deadlines made absolute). `ApprovalState` is the held call's votes so far.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from interlock.domain.chat.stages import (
    CurrentStage,
    Stage,
    StageTerms,
    StageVote,
    check_spans,
    first_stage,
    names,
    next_stage,
    seconds,
)

VoteKind = Literal["approve", "edit", "reject"]
Outcome = Literal["pending", "approved", "rejected"]
DEFAULT_ROLES = ("approver",)


def normalise_id(principal: str | None) -> str:
    """One person, one id: "dave", "Dave", "dave " and "da\u00adve" compare equal (NFKC,
    invisible format characters such as a zero-width space or a soft hyphen dropped, trimmed,
    casefolded). Look-alike letters of other scripts stay apart: the API refuses such ids."""
    if principal is None or principal.isascii():
        return (principal or "").strip().casefold()
    text = unicodedata.normalize("NFKC", principal)
    return "".join(c for c in text if unicodedata.category(c) != "Cf").strip().casefold()


_names = names
_seconds = seconds


def _unset(value: Any) -> bool:
    """A field added after logs were written: left out of the JSON while unset, so what
    a one-stage policy records and seals is byte for byte what it was before."""
    return value is None


def _pairs(conflicts: Iterable[Iterable[str]]) -> tuple[tuple[str, str], ...]:
    pairs = set()
    for pair in conflicts:
        both = names(pair)
        if len(both) != 2:
            raise ValueError(f"Approval: a conflict names two distinct roles, not {pair!r}")
        pairs.add((both[0], both[1]))
    return tuple(sorted(pairs))


@dataclass(frozen=True)
class Approval:
    """A tool call needs approval before it runs (`when` of the validated input holds).

    `roles`/`groups` may decide (default: the `approver` role); `quorum` distinct approvers,
    never the requester; `expires_in` fails it closed; after `escalate_after` the
    `escalate_to` roles and `escalate_to_groups` may decide too. A rejection rejects
    unless `reject_rejects=False` (then it is only recorded).
    """

    when: Callable[[Any], bool] | None = None
    roles: Iterable[str] = ()
    groups: Iterable[str] = ()
    quorum: int = 1
    expires_in: timedelta | None = None
    escalate_after: timedelta | None = None
    escalate_to: Iterable[str] = ()
    escalate_to_groups: Iterable[str] = ()
    reject_rejects: bool = True
    stages: Sequence[Stage] = ()
    conflicts: Iterable[Iterable[str]] = ()

    def __post_init__(self) -> None:
        for name in ("roles", "groups", "escalate_to", "escalate_to_groups"):
            object.__setattr__(self, name, _names(getattr(self, name)))
        object.__setattr__(self, "stages", tuple(self.stages))
        object.__setattr__(self, "conflicts", _pairs(self.conflicts))
        check_spans("Approval", self.quorum, self.expires_in, self.escalate_after,
                    bool(self.escalate_to or self.escalate_to_groups))
        if self.stages:
            self._check_stages()

    def _check_stages(self) -> None:
        own = (self.roles, self.groups, self.quorum != 1, self.expires_in, self.escalate_after)
        if any(own):
            raise ValueError("Approval: with stages, give roles, groups, quorum, expiry and"
                             " escalation on each Stage")
        if len({s.name for s in self.stages}) != len(self.stages):
            raise ValueError("Approval: stage names must differ")

    def applies(self, validated_input: Any) -> bool:
        """Whether this input needs approval (always, without `when`); a staged policy
        needs at least one of its stages to apply."""
        if self.when is not None and not self.when(validated_input):
            return False
        return not self.stages or any(self.stages_apply(validated_input) or ())

    def stages_apply(self, validated_input: Any) -> list[bool] | None:
        """Which stages this input goes through (None: the policy has no stages)."""
        return [s.applies(validated_input) for s in self.stages] if self.stages else None

    def describe(self) -> dict[str, Any]:
        """The policy as JSON, without the function (what the fingerprint hashes)."""
        return {
            "when": None if self.when is None else getattr(self.when, "__qualname__", "when"),
            "roles": list(self.roles or (() if self.groups else DEFAULT_ROLES)),
            "groups": list(self.groups),
            "quorum": self.quorum,
            "expires_in": _seconds(self.expires_in),
            "escalate_after": _seconds(self.escalate_after),
            "escalate_to": list(self.escalate_to),
            "escalate_to_groups": list(self.escalate_to_groups),
            "reject_rejects": self.reject_rejects,
            # only when set: the fingerprint of a policy without them stays as it was
            **({"stages": [s.terms().model_dump() for s in self.stages]} if self.stages else {}),
            **({"conflicts": [list(p) for p in self.conflicts]} if self.conflicts else {}),
        }

    def terms(self, at: datetime, requested_by: str | None,
              stages_apply: Sequence[bool] | None = None) -> ApprovalTerms:
        """What the log records when a call is held: absolute deadlines, no function.

        A staged policy records every stage and which of them apply (`stages_apply`, of
        the input as requested; None: all, failing closed); its own deciders, quorum and
        deadlines are then those of the first stage that applies, opened at `at`."""
        conflicts = [list(p) for p in self.conflicts] or None
        if self.stages:
            return self._staged_terms(at, requested_by, stages_apply, conflicts)
        d = self.describe()
        return ApprovalTerms(
            roles=d["roles"], groups=d["groups"], quorum=self.quorum,
            reject_rejects=self.reject_rejects, requested_by=requested_by,
            expires_at=at + self.expires_in if self.expires_in else None,
            escalate_at=at + self.escalate_after if self.escalate_after else None,
            escalate_to=list(self.escalate_to), escalate_to_groups=list(self.escalate_to_groups),
            conflicts=conflicts,
        )

    def _staged_terms(self, at: datetime, requested_by: str | None,
                      stages_apply: Sequence[bool] | None,
                      conflicts: list[list[str]] | None) -> ApprovalTerms:
        stages = [s.terms() for s in self.stages]
        applying = list(stages_apply) if stages_apply is not None else [True] * len(stages)
        first = stages[first_stage(applying)]
        expires_at, escalate_at = first.deadlines(at)
        return ApprovalTerms(
            roles=first.roles, groups=first.groups, quorum=first.quorum,
            reject_rejects=self.reject_rejects, requested_by=requested_by,
            expires_at=expires_at, escalate_at=escalate_at, escalate_to=first.escalate_to,
            escalate_to_groups=first.escalate_to_groups, stages=stages, stages_apply=applying,
            conflicts=conflicts)




@dataclass(frozen=True)
class ToolMatch:
    """Names tools in `Agent(approvals=...)` by origin or declaration rather than by name.

    `server` and `name` match a tool's provenance (an MCP server's name and its own name
    for the tool); `annotations` match the tool's declared annotations, a missing one
    matching nothing: `ToolMatch(annotations={"destructiveHint": True})`.
    """

    server: str | None = None
    name: str | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.server is None and self.name is None and not self.annotations:
            raise ValueError("ToolMatch: name a server, a tool name or annotations")
        object.__setattr__(self, "annotations", dict(self.annotations))

    def __hash__(self) -> int:  # a key of `Agent.approvals`
        return hash((self.server, self.name, tuple(sorted(self.annotations.items()))))

    def matches(self, name: str, provenance: Mapping[str, Any] | None,
                annotations: Mapping[str, Any] | None) -> bool:
        """Whether a tool of this name, provenance and annotations is one this names."""
        source, declared = provenance or {}, annotations or {}
        if self.server is not None and source.get("server") != self.server:
            return False
        if self.name is not None and source.get("tool", name) != self.name:
            return False
        return all(k in declared and declared[k] == v for k, v in self.annotations.items())

    def describe(self) -> dict[str, Any]:
        return {"server": self.server, "name": self.name, "annotations": dict(self.annotations)}


class PolicyRef(BaseModel):
    """The tenant's data policy version a call was held under (domain/policy_book.py):
    who proposed it and who approved it (neither may decide the call)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    version: int
    proposed_by: str
    approved_by: str

    def authors(self) -> dict[str, str]:
        """Who changed the policy, normalised, and how ("proposed", "approved")."""
        return {normalise_id(self.approved_by): "approved",
                normalise_id(self.proposed_by): "proposed"}


class ApprovalTerms(BaseModel):
    """The policy in force for one held call, as recorded on `ApprovalRequested`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    roles: list[str]
    groups: list[str] = []
    quorum: int = 1
    reject_rejects: bool = True
    requested_by: str | None = None
    expires_at: datetime | None = None
    escalate_at: datetime | None = None
    escalate_to: list[str] = []
    escalate_to_groups: list[str] = []
    # A staged policy: every stage, and which apply to the input as requested (the fields
    # above are then the first applying stage's). An old log has none: one stage.
    stages: list[StageTerms] | None = Field(default=None, exclude_if=_unset)
    stages_apply: list[bool] | None = Field(default=None, exclude_if=_unset)
    conflicts: list[list[str]] | None = Field(default=None, exclude_if=_unset)
    # Held under a tenant's data policy (not the agent's code): which version, by whom.
    policy: PolicyRef | None = Field(default=None, exclude_if=_unset)


class Vote(BaseModel):
    """One principal's vote; `input_sha256` is the input it was cast on (an edit: the new one).
    `stage` is the stage it was cast in (None: a one-stage policy)."""

    model_config = ConfigDict(frozen=True)

    actor: str
    kind: VoteKind
    at: datetime
    input_sha256: str
    reason: str | None = None
    stage: int | None = Field(default=None, exclude_if=_unset)
    for_actor: str | None = Field(default=None, exclude_if=_unset)  # by delegation, for whom
    delegation: str | None = Field(default=None, exclude_if=_unset)

    def people(self) -> set[str]:
        """Whose vote it is, normalised: its caster and, by delegation, whom it was for."""
        return {normalise_id(i) for i in (self.actor, self.for_actor) if i}


class ForkedCall(BaseModel):
    """A fork's call asked afresh: call `ref` of chat `chat_id` (the chat forked), asked
    there by `requested_by`; `by` are the forkers (one per fork, the first first), who
    ask for it again. It keeps the idempotency key of chat `key_chat_id`, the first
    source, so a payee sees one payment however often it is forked."""

    model_config = ConfigDict(frozen=True)

    chat_id: UUID
    ref: str
    key_chat_id: UUID
    requested_by: str | None = None
    by: list[str] = []

    def requesters(self) -> set[str]:
        """Who counts as asking for it (normalised): the source's requester, each forker."""
        return {normalise_id(i) for i in (self.requested_by, *self.by) if i}


class ApprovalState(BaseModel):
    """A held call's terms, votes so far and outcome; `forked_from` names the call a
    fork's held call is a fresh copy of (its requesters may not vote on it)."""

    terms: ApprovalTerms
    votes: list[Vote] = []
    escalated: bool = False
    outcome: Outcome = "pending"
    forked_from: ForkedCall | None = None
    # A staged policy: the stage it waits in, since when (None: since it was held, with the
    # terms' own deadlines), and which stages apply to the current input.
    stage: int | None = Field(default=None, exclude_if=_unset)
    stage_at: datetime | None = Field(default=None, exclude_if=_unset)
    stages_apply: list[bool] | None = Field(default=None, exclude_if=_unset)

    @classmethod
    def opened(cls, terms: ApprovalTerms, forked_from: ForkedCall | None = None
               ) -> ApprovalState:
        """A call just held under `terms`: no votes, in its first applying stage."""
        if terms.stages is None:
            return cls(terms=terms, forked_from=forked_from)
        applying = terms.stages_apply or [True] * len(terms.stages)
        return cls(terms=terms, forked_from=forked_from, stage=first_stage(applying),
                   stages_apply=list(applying))

    def record(self, vote: Vote, *, next_stage: int | None = None,
               stages_apply: list[bool] | None = None) -> None:
        """Add a vote (apply code: assigns only). An edit of a staged call sends it back
        to its first applying stage; `next_stage` opens the stage a vote completed into."""
        self.votes.append(vote)
        if self.stage is None:
            return
        if vote.kind == "edit":
            self.stages_apply = stages_apply or [True] * len(self.terms.stages or ())
            self.stage, self.stage_at, self.escalated = (
                first_stage(self.stages_apply), vote.at, False)
        elif next_stage is not None:
            self.stage, self.stage_at, self.escalated = next_stage, vote.at, False

    def current(self) -> ApprovalTerms:
        """The terms of the stage it waits in, as a one-stage policy's (absolute deadlines)."""
        if self.stage is None or self.terms.stages is None or self.stage_at is None:
            return self.terms
        stage = self.terms.stages[self.stage]
        expires_at, escalate_at = stage.deadlines(self.stage_at)
        return self.terms.model_copy(update={
            "roles": stage.roles, "groups": stage.groups, "quorum": stage.quorum,
            "expires_at": expires_at, "escalate_at": escalate_at,
            "escalate_to": stage.escalate_to, "escalate_to_groups": stage.escalate_to_groups})

    def next_stage(self) -> int | None:
        """The stage after this one that applies to the current input, if any."""
        if self.stage is None:
            return None
        return next_stage(self.stages_apply or [], self.stage)

    def stage_votes(self) -> list[Vote]:
        """The votes of the current stage on the current input (all, for one stage)."""
        return [v for v in self.current_votes() if v.stage == self.stage]

    def voted_in(self, actor: str | set[str]) -> int | None:
        """Another stage this principal (or any of a set of normalised ids) voted in on the
        current input, by themselves or by delegation (segregation)."""
        us = {normalise_id(actor)} if isinstance(actor, str) else actor
        return next((v.stage for v in self.current_votes() if v.stage is not None
                     and v.stage != self.stage and us & v.people()), None)

    def current_stage(self) -> CurrentStage | None:
        """The stage it waits in, as the pending views show it (None: one stage)."""
        if self.stage is None or self.terms.stages is None:
            return None
        terms, stages = self.current(), self.terms.stages
        roles, groups = self.deciders()
        applying = self.stages_apply or [True] * len(stages)
        return CurrentStage(
            index=self.stage, name=stages[self.stage].name, of=len(stages),
            roles=sorted(roles), groups=sorted(groups), quorum=terms.quorum,
            votes=[StageVote(actor=v.actor, kind=v.kind, at=v.at, for_actor=v.for_actor)
                   for v in self.stage_votes()],
            expires_at=terms.expires_at,
            skipped=[s.name for s, a in zip(stages, applying, strict=True) if not a])

    def current_votes(self) -> list[Vote]:
        """The votes cast on the current input: those since its last edit. A vote before an
        edit was given on another input, and never counts after it, even when a later edit
        puts back an input of the same hash."""
        edits = [i for i, v in enumerate(self.votes) if v.kind == "edit"]
        return self.votes[edits[-1] + 1:] if edits else list(self.votes)

    def approvers(self, input_sha256: str, requester: str | None) -> set[str]:
        """Distinct approvers of this exact input since its last edit, never the requester."""
        me = normalise_id(requester)
        return {normalise_id(v.for_actor or v.actor) for v in self.stage_votes()
                if v.kind == "approve" and v.input_sha256 == input_sha256
                and me not in v.people()}

    def vote_of(self, actor: str | set[str], input_sha256: str) -> Vote | None:
        """This principal's vote on this input since its last edit (one vote per person per
        input), cast by them or for them; `actor` may be a set of normalised ids."""
        us = {normalise_id(actor)} if isinstance(actor, str) else actor
        return next((v for v in self.current_votes()
                     if us & v.people() and v.input_sha256 == input_sha256), None)

    def deciders(self) -> tuple[set[str], set[str]]:
        """The roles and groups that may decide now, in the current stage (escalation
        widens them)."""
        terms = self.current()
        roles, groups = set(terms.roles), set(terms.groups)
        if self.escalated:
            roles |= set(terms.escalate_to)
            groups |= set(terms.escalate_to_groups)
        return roles, groups


@dataclass(frozen=True)
class Decider:
    """Who decides: an id, roles (custom ones such as `treasury` too) and groups."""

    id: str
    roles: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    # Deciding for someone by delegation (domain/delegations.py): `roles`/`groups` are then
    # the delegated scope, and `holds` the delegate's own roles (a conflict counts both).
    acting_for: str | None = None
    delegation: str | None = None
    holds: frozenset[str] = frozenset()

    @property
    def admin(self) -> bool:
        return "admin" in self.roles

    def people(self) -> set[str]:
        """Who this vote is cast by, normalised: the decider, and whom it decides for."""
        return {normalise_id(i) for i in (self.id, self.acting_for) if i}

    def may_decide(self, roles: set[str], groups: set[str]) -> bool:
        return self.admin or bool(self.roles & roles) or bool(self.groups & groups)

    @classmethod
    def trusted(cls, actor: str) -> Decider:
        """An in-process caller (no HTTP keys): may decide anything, still counted by id."""
        return cls(actor, frozenset({"admin"}))
