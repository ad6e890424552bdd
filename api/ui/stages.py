"""What the console shows of a staged approval: each stage in order, who may decide it, its
quorum, who voted in it and when, which one waits now, which do not apply to this input.

Every fact is the domain's (`ApprovalState`: the stage it waits in, which stages apply to
the current input, the votes since its last edit); this module only puts them in words.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from interlock.domain.chat.policies import ApprovalState, Vote, normalise_id
from interlock.domain.chat.stages import CurrentStage
from interlock.domain.chat.state import ToolCall

Status = Literal["approved", "waiting", "to come", "skipped", "rejected", "not reached",
                 "ended"]
STATUS_WORDS: dict[str, str] = {
    "approved": "approved", "waiting": "waiting now", "to come": "to come",
    "skipped": "skipped: does not apply to this input", "rejected": "rejected here",
    "not reached": "not reached", "ended": "ended here"}


def in_words(roles: Iterable[str], groups: Iterable[str]) -> str:
    """"role treasury", "roles a or b, or group finance": who may decide."""
    r, g = sorted(roles), sorted(groups)
    said = [f"role{'s' if len(r) > 1 else ''} {' or '.join(r)}" if r else "",
            f"group{'s' if len(g) > 1 else ''} {' or '.join(g)}" if g else ""]
    return ", or ".join(s for s in said if s) or "an admin"


def short_id(delegation: str | None) -> str:
    """A delegation's id as the page names it (its first eight hex digits)."""
    return (delegation or "")[:8]


@dataclass(frozen=True)
class StageVoteView:
    """A vote cast in a stage on the current input; by delegation, `for_actor` and its id."""

    actor: str
    kind: str
    at: datetime
    for_actor: str | None
    delegation: str | None

    @property
    def short(self) -> str:
        return short_id(self.delegation)


@dataclass(frozen=True)
class StageView:
    """One stage of a held call, as its page lists it."""

    number: int  # from 1
    name: str
    deciders: str
    quorum: int
    status: Status
    when: str | None  # the author's condition, by name: the stage applies when it holds
    votes: tuple[StageVoteView, ...]

    @property
    def status_words(self) -> str:
        return STATUS_WORDS[self.status]

    @property
    def approvals(self) -> int:
        return len({normalise_id(v.for_actor or v.actor) for v in self.votes
                    if v.kind == "approve"})


def _status(i: int, applies: bool, state: ApprovalState, pending: bool) -> Status:
    current = state.stage if state.stage is not None else 0
    if not applies:
        return "skipped"
    if i < current:
        return "approved"  # an applying stage before the current one passed on this input
    if i == current:
        if state.outcome in ("approved", "rejected"):
            return state.outcome
        return "waiting" if pending else "ended"
    return "to come" if pending and state.outcome == "pending" else "not reached"


def stage_views(call: ToolCall) -> tuple[StageView, ...]:
    """The stages of a staged held call in order (empty: one stage, or not held)."""
    state = call.approval
    if state is None or state.terms.stages is None:
        return ()
    stages = state.terms.stages
    applying = state.stages_apply or [True] * len(stages)
    votes = state.current_votes()
    pending = call.status == "interrupted"
    current_roles, current_groups = state.deciders()  # escalation widens the waiting one
    found = []
    for i, (stage, applies) in enumerate(zip(stages, applying, strict=True)):
        status = _status(i, applies, state, pending)
        roles, groups = ((current_roles, current_groups) if status == "waiting"
                         else (stage.roles, stage.groups))
        found.append(StageView(
            number=i + 1, name=stage.name, deciders=in_words(roles, groups),
            quorum=stage.quorum, status=status, when=stage.when,
            votes=tuple(_vote(v) for v in votes if v.stage == i)))
    return tuple(found)


def _vote(v: Vote) -> StageVoteView:
    return StageVoteView(actor=v.actor, kind=v.kind, at=v.at, for_actor=v.for_actor,
                         delegation=v.delegation)


def stage_line(stage: CurrentStage | None) -> str | None:
    """"stage 2 of 3: treasury": where a staged call waits (an inbox row says it)."""
    if stage is None:
        return None
    return f"stage {stage.index + 1} of {stage.of}: {stage.name}"
