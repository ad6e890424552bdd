"""Approval policies: which calls need a yes, who may give it, how many, by when.

`Approval` is what an author declares (with `when`, a function); `ApprovalTerms` is what
the log records when a call is held for approval (the policy without the function, with
its deadlines made absolute). `ApprovalState` is the held call's votes so far.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict

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


def _names(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({v.strip() for v in values if v.strip()}))


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

    def __post_init__(self) -> None:
        for name in ("roles", "groups", "escalate_to", "escalate_to_groups"):
            object.__setattr__(self, name, _names(getattr(self, name)))
        if self.quorum < 1:
            raise ValueError("Approval: quorum must be at least 1")
        for name in ("expires_in", "escalate_after"):
            span = getattr(self, name)
            if span is not None and span <= timedelta(0):
                raise ValueError(f"Approval: {name} must be positive")
        if self.escalate_after is not None and not (self.escalate_to or self.escalate_to_groups):
            raise ValueError("Approval: escalate_after needs escalate_to or escalate_to_groups")

    def applies(self, validated_input: Any) -> bool:
        """Whether this input needs approval (always, without `when`)."""
        return True if self.when is None else bool(self.when(validated_input))

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
        }

    def terms(self, at: datetime, requested_by: str | None) -> ApprovalTerms:
        """What the log records when a call is held: absolute deadlines, no function."""
        d = self.describe()
        return ApprovalTerms(
            roles=d["roles"], groups=d["groups"], quorum=self.quorum,
            reject_rejects=self.reject_rejects, requested_by=requested_by,
            expires_at=at + self.expires_in if self.expires_in else None,
            escalate_at=at + self.escalate_after if self.escalate_after else None,
            escalate_to=list(self.escalate_to), escalate_to_groups=list(self.escalate_to_groups),
        )


def _seconds(span: timedelta | None) -> float | None:
    return None if span is None else span.total_seconds()


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


class Vote(BaseModel):
    """One principal's vote; `input_sha256` is the input it was cast on (an edit: the new one)."""

    model_config = ConfigDict(frozen=True)

    actor: str
    kind: VoteKind
    at: datetime
    input_sha256: str
    reason: str | None = None


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

    def current_votes(self) -> list[Vote]:
        """The votes cast on the current input: those since its last edit. A vote before an
        edit was given on another input, and never counts after it, even when a later edit
        puts back an input of the same hash."""
        edits = [i for i, v in enumerate(self.votes) if v.kind == "edit"]
        return self.votes[edits[-1] + 1:] if edits else list(self.votes)

    def approvers(self, input_sha256: str, requester: str | None) -> set[str]:
        """Distinct approvers of this exact input since its last edit, never the requester."""
        me = normalise_id(requester)
        return {normalise_id(v.actor) for v in self.current_votes()
                if v.kind == "approve" and v.input_sha256 == input_sha256
                and normalise_id(v.actor) != me}

    def vote_of(self, actor: str, input_sha256: str) -> Vote | None:
        """This principal's vote on this input since its last edit (one vote per person per
        input)."""
        me = normalise_id(actor)
        return next((v for v in self.current_votes()
                     if normalise_id(v.actor) == me and v.input_sha256 == input_sha256), None)

    def deciders(self) -> tuple[set[str], set[str]]:
        """The roles and groups that may decide now (escalation widens them)."""
        roles, groups = set(self.terms.roles), set(self.terms.groups)
        if self.escalated:
            roles |= set(self.terms.escalate_to)
            groups |= set(self.terms.escalate_to_groups)
        return roles, groups


@dataclass(frozen=True)
class Decider:
    """Who decides: an id, roles (custom ones such as `treasury` too) and groups."""

    id: str
    roles: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    @property
    def admin(self) -> bool:
        return "admin" in self.roles

    def may_decide(self, roles: set[str], groups: set[str]) -> bool:
        return self.admin or bool(self.roles & roles) or bool(self.groups & groups)

    @classmethod
    def trusted(cls, actor: str) -> Decider:
        """An in-process caller (no HTTP keys): may decide anything, still counted by id."""
        return cls(actor, frozenset({"admin"}))
