"""Stages of one approval, in order: "the team lead, then treasury, then over 100,000 the CFO".

`Stage` is what an author declares (its `when` a function of the validated input);
`StageTerms` is what the log records of it (no function, its spans relative to the moment
the stage opens); `CurrentStage` is how a held call shows the stage it waits in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict


def names(values: Iterable[str]) -> tuple[str, ...]:
    """Role or group names: trimmed, without blanks or repeats, sorted."""
    return tuple(sorted({v.strip() for v in values if v.strip()}))


def seconds(span: timedelta | None) -> float | None:
    return None if span is None else span.total_seconds()


def check_spans(owner: str, quorum: int, expires_in: timedelta | None,
                escalate_after: timedelta | None, escalates: bool) -> None:
    """The checks an `Approval` and a `Stage` share (a developer's mistake: ValueError)."""
    if quorum < 1:
        raise ValueError(f"{owner}: quorum must be at least 1")
    for name, span in (("expires_in", expires_in), ("escalate_after", escalate_after)):
        if span is not None and span <= timedelta(0):
            raise ValueError(f"{owner}: {name} must be positive")
    if escalate_after is not None and not escalates:
        raise ValueError(f"{owner}: escalate_after needs escalate_to or escalate_to_groups")


def first_stage(applying: Sequence[bool]) -> int:
    """The first stage that applies; the first of all when none does (fail closed: an
    edited input nobody but its editor has seen must still be approved by someone)."""
    return next((i for i, applies in enumerate(applying) if applies), 0)


def next_stage(applying: Sequence[bool], after: int) -> int | None:
    """The stage after `after` that applies, if any."""
    return next((i for i in range(after + 1, len(applying)) if applying[i]), None)


@dataclass(frozen=True)
class Stage:
    """One stage of `Approval(stages=[...])`: who decides it, how many, by when after it
    opens; `when` (of the validated input) skips it when false, as the CFO's stage below
    a threshold. Its `roles`/`groups` default to the `approver` role."""

    name: str
    roles: Iterable[str] = ()
    groups: Iterable[str] = ()
    quorum: int = 1
    when: Callable[[Any], bool] | None = None
    expires_in: timedelta | None = None
    escalate_after: timedelta | None = None
    escalate_to: Iterable[str] = ()
    escalate_to_groups: Iterable[str] = ()

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("Stage: a stage needs a name")
        for name in ("roles", "groups", "escalate_to", "escalate_to_groups"):
            object.__setattr__(self, name, names(getattr(self, name)))
        check_spans(f"Stage {self.name}", self.quorum, self.expires_in, self.escalate_after,
                    bool(self.escalate_to or self.escalate_to_groups))

    def applies(self, validated_input: Any) -> bool:
        """Whether this input goes through this stage; a `when` that fails holds it (closed)."""
        if self.when is None:
            return True
        try:
            return bool(self.when(validated_input))
        except Exception:  # noqa: BLE001 - the author's `when` failed: fail closed, keep the stage
            return True

    def terms(self) -> StageTerms:
        """The stage as the log records it (what the fingerprint hashes, too)."""
        return StageTerms(
            name=self.name,
            when=None if self.when is None else getattr(self.when, "__qualname__", "when"),
            roles=list(self.roles or (() if self.groups else ("approver",))),
            groups=list(self.groups), quorum=self.quorum,
            expires_in=seconds(self.expires_in), escalate_after=seconds(self.escalate_after),
            escalate_to=list(self.escalate_to), escalate_to_groups=list(self.escalate_to_groups))


class StageTerms(BaseModel):
    """One stage as recorded: its spans count from the moment it opens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    when: str | None = None
    roles: list[str]
    groups: list[str] = []
    quorum: int = 1
    expires_in: float | None = None
    escalate_after: float | None = None
    escalate_to: list[str] = []
    escalate_to_groups: list[str] = []

    def deadlines(self, opened: datetime) -> tuple[datetime | None, datetime | None]:
        """The stage's expiry and escalation, for a stage opened at `opened`."""
        return tuple(  # type: ignore[return-value]
            None if span is None else opened + timedelta(seconds=span)
            for span in (self.expires_in, self.escalate_after))


class StageVote(BaseModel):
    """A vote of the current stage, as the pending views show it."""

    model_config = ConfigDict(frozen=True)

    actor: str
    kind: str
    at: datetime
    for_actor: str | None = None


class CurrentStage(BaseModel):
    """The stage a held call waits in: which of how many, who may decide it, votes so far."""

    model_config = ConfigDict(frozen=True)

    index: int
    name: str
    of: int  # how many stages the policy has (some may be skipped by their `when`)
    roles: list[str]
    groups: list[str] = []
    quorum: int
    votes: list[StageVote] = []
    expires_at: datetime | None = None
    skipped: list[str] = []  # the stages whose `when` does not apply to the current input
