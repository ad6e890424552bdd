"""What the console shows of an approval policy: who decides, quorum, deadline, votes so far.

Every rule is the domain's: the page asks `domain.chat.rules` why a visitor may not vote
(the same checks the server runs on submit), and counts approvals with `ApprovalState`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from interlock.api.auth import DEV_PRINCIPAL, Principal
from interlock.api.dev_principals import dev_hint
from interlock.api.ui.stages import StageView, short_id, stage_line, stage_views
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.policies import ApprovalState, PolicyRef
from interlock.domain.chat.rules import ApproveEntry, check_voter, held_call
from interlock.domain.chat.state import ToolCall
from interlock.domain.errors import (
    AlreadyVotedError,
    ForbiddenError,
    InterlockError,
    InterruptExpiredError,
)
from interlock.projections.interface import InboxRow


@dataclass(frozen=True)
class VoteView:
    """One recorded vote; `current` when it was cast on the input shown now."""

    actor: str
    kind: str
    at: datetime
    reason: str | None
    current: bool
    stage: str | None = None  # a staged policy: the stage it was cast in
    for_actor: str | None = None  # by delegation: whom it was cast for
    delegation: str | None = None

    @property
    def short(self) -> str:
        return short_id(self.delegation)


@dataclass(frozen=True)
class PolicyView:
    """The terms a held call was recorded under, and where its votes stand."""

    deciders: str
    quorum: int
    approvals: int
    requester: str | None
    deadline: datetime | None
    time_left: str | None
    escalation: str | None
    reject_rejects: bool
    outcome: str
    votes: tuple[VoteView, ...]
    stage: str | None = None  # a staged policy: "stage 2 of 3: treasury", where it waits
    final: bool = True  # the quorum of this stage decides the call (no applying stage after)
    stages: tuple[StageView, ...] = ()  # a staged policy's stages, in order
    data_policy: PolicyRef | None = None  # the tenant's data policy version it was held under

    @property
    def tally(self) -> str:
        return f"{self.approvals} of {self.quorum} approval{'s' if self.quorum != 1 else ''}"


def policy_view(call: ToolCall, now: datetime) -> PolicyView | None:
    """The policy block of the approval page (None: a tool's own interrupt)."""
    state = call.approval
    if state is None:
        return None
    terms, current = state.current(), sha256_hex(call.input)  # a staged call: its stage
    names = [s.name for s in state.terms.stages or ()]
    return PolicyView(
        deciders=deciders(state), quorum=terms.quorum,
        approvals=len(state.approvers(current, call.requester)), requester=call.requester,
        deadline=terms.expires_at, time_left=time_left(terms.expires_at, now),
        escalation=_escalation(state), reject_rejects=terms.reject_rejects,
        outcome=state.outcome,
        votes=tuple(VoteView(actor=v.actor, kind=v.kind, at=v.at, reason=v.reason,
                             current=v.input_sha256 == current,
                             stage=names[v.stage] if v.stage is not None else None,
                             for_actor=v.for_actor, delegation=v.delegation)
                    for v in state.votes),
        stage=stage_line(state.current_stage()), final=state.next_stage() is None,
        stages=stage_views(call), data_policy=state.terms.policy,
    )


def deciders(state: ApprovalState) -> str:
    """"role treasury", "roles a or b, or group finance": who may decide now."""
    roles, groups = (sorted(names) for names in state.deciders())
    said = [f"role{'s' if len(roles) > 1 else ''} {' or '.join(roles)}" if roles else "",
            f"group{'s' if len(groups) > 1 else ''} {' or '.join(groups)}" if groups else ""]
    return ", or ".join(s for s in said if s) + " (an admin always may)"


def _escalation(state: ApprovalState) -> str | None:
    terms = state.current()
    wider = sorted(terms.escalate_to) + [f"group {g}" for g in sorted(terms.escalate_to_groups)]
    if state.escalated:
        return f"escalated: {', '.join(wider)} may decide too"
    if terms.escalate_at is None:
        return None
    return f"at {terms.escalate_at:%Y-%m-%d %H:%M:%S} UTC, {', '.join(wider)} may decide too"


def time_left(deadline: datetime | None, now: datetime) -> str | None:
    """"2 h 5 min left", "40 s left", or "past its deadline" (it fails closed)."""
    if deadline is None:
        return None
    seconds = int((deadline - now).total_seconds())
    if seconds <= 0:
        return "past its deadline: it fails closed"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min left"
    return f"{minutes} min left" if minutes else f"{secs} s left"


PREFIXES = {"requester": "Four-eyes: ", "other_stage": "Segregation: ",
            "conflicting_roles": "Segregation: "}


def open_to_votes(call: ToolCall, now: datetime) -> bool:
    """Whether the held call takes a vote now on the input the page shows (anyone's)."""
    try:
        seen = ApproveEntry(ref=call.ref, name=call.name, input_sha256=sha256_hex(call.input))
        held_call({call.ref: call}, seen, now)
    except InterlockError:  # decided, expired, not an approval: no vote goes in
        return False
    return True


def why_not_vote(who: Principal, call: ToolCall, now: datetime,
                 delegated: bool = False) -> str | None:
    """Why `who` cannot vote on this held call now, in the server's words; None if they can.
    `delegated`: they may still vote for someone else, by a delegation the form offers."""
    try:
        seen = ApproveEntry(ref=call.ref, name=call.name, input_sha256=sha256_hex(call.input))
        held_call({call.ref: call}, seen, now)  # on the input the page shows
        check_voter(call, who.decider())
    except ForbiddenError as exc:
        prefix = PREFIXES.get(str(exc.details.get("reason")), "Routing: ")
        hint = dev_hint(exc) if who == DEV_PRINCIPAL else None  # dev mode's one user
        then = f" {hint[0].upper()}{hint[1:]}." if hint else ""
        tail = (f"You ({who.id}) may not vote yourself, only by a delegation to you (below)."
                if delegated else f"You ({who.id}) can read this but not vote.")
        return f"{prefix}{exc.message}. {tail}{then}"
    except (AlreadyVotedError, InterruptExpiredError) as exc:
        return f"You cannot vote: {exc.message}."
    return None


@dataclass(frozen=True)
class HeldSummary:
    """An inbox row's votes so far and time left."""

    tally: str
    votes: int
    time_left: str | None
    deadline: datetime | None
    stage: str | None = None  # a staged policy: "stage 2 of 3: treasury"


def held_summary(row: InboxRow, now: datetime) -> HeldSummary | None:
    """For a row held by a policy; None for a tool's own interrupt."""
    raw: dict[str, Any] | None = row.approval
    if raw is None:
        return None
    state = ApprovalState.model_validate(raw)
    quorum = state.current().quorum  # a staged call: its current stage's
    approvals = 0
    if any(v.kind == "approve" for v in state.votes):  # else the input need not be hashed
        approvals = len(state.approvers(sha256_hex(row.input), state.terms.requested_by))
    return HeldSummary(tally=f"{approvals} of {quorum} approval{'s' if quorum != 1 else ''}",
                       votes=len(state.votes), time_left=time_left(row.expires_at, now),
                       deadline=row.expires_at, stage=stage_line(row.stage))
