"""The Review aggregate's events: each step of a second-line review, with its actor.

They are sealed into their own chain like a chat's events (the mapper stores only
`ChatEvent` classes, so a review event is one), under the stable topics
`interlock:<ClassName>`. `change` only assigns: it runs again on every replay.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from eventsourcing.domain import OriginatorVersionError
from eventsourcing.utils import resolve_topic
from pydantic import BaseModel, ConfigDict

from interlock.domain.review.sampling import Method
from interlock.domain.streams import StreamEvent

if TYPE_CHECKING:
    from interlock.domain.review.aggregate import Review

Verdict = Literal["ok", "finding"]
Severity = Literal["low", "medium", "high", "critical"]
ReviewStatus = Literal["open", "signed_off", "closed"]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class QueryRecord(Frozen):
    """Which query chose the population: its name, version, filter text and parameters."""

    name: str
    version: int
    filter: str
    params: dict[str, Any]


class SampleRecord(Frozen):
    """How the items were drawn: the same seed over the same population draws them again."""

    size: int
    strata: tuple[str, ...]
    seed: str
    population: int
    strata_sizes: dict[str, int]  # each stratum's size ("a|b" for several), as allotted
    method: Method = "sha256-v1"  # how candidates were ranked (sampling.py); older reviews'


class ReviewItem(Frozen):
    """One sampled decision, and who took part in its call (segregation of duties)."""

    n: int
    chat_id: str
    version: int
    ref: str
    tool: str
    kind: str
    actor: str
    requested_by: tuple[str, ...] = ()
    edited_by: tuple[str, ...] = ()
    decided_by: tuple[str, ...] = ()


class Assessment(Frozen):
    item: int
    verdict: Verdict
    severity: Severity | None
    note: str
    actor: str
    at: datetime


class ReviewState(BaseModel):
    tenant: str
    opened_by: str
    opened_at: datetime
    query: QueryRecord
    sample: SampleRecord
    items: list[ReviewItem]
    assessments: dict[int, Assessment] = {}
    status: ReviewStatus = "open"
    signed_off_by: str | None = None
    signed_off_at: datetime | None = None
    sign_off_note: str | None = None
    signers: int = 1  # 2: the tenant asks a second, distinct auditor to sign off before close
    countersigned_by: str | None = None
    countersigned_at: datetime | None = None
    countersign_note: str | None = None
    closed_by: str | None = None
    closed_at: datetime | None = None
    chain_tip: str | None = None


def _aggregate() -> type[Review]:
    """The Review class, by its stable topic: the aggregate's module imports this one."""
    return resolve_topic("interlock:Review")  # type: ignore[no-any-return]


class ReviewEvent(StreamEvent):
    """A review's event: versioned and chained as a chat's are (a stream that is no chat)."""

    def mutate(self, review: Review | None) -> Review:  # type: ignore[override]
        assert review is not None, "only ReviewOpened may begin a review"
        if self.originator_version != review.version + 1:
            raise OriginatorVersionError(self.originator_version, review.version + 1)
        self.change(review.state)
        review.version = self.originator_version
        if self.chain is not None:
            review.state.chain_tip = self.chain
        return review

    def change(self, state: ReviewState) -> None:
        """Change the state; deterministic, runs again on every replay."""


class ReviewOpened(ReviewEvent):
    tenant: str
    actor: str
    query: QueryRecord
    sample: SampleRecord
    items: tuple[ReviewItem, ...]
    signers: int = 1  # recorded when opened: a later change of the tenant's option keeps it

    def mutate(self, review: Review | None) -> Review:  # type: ignore[override]
        state = ReviewState(tenant=self.tenant, opened_by=self.actor, opened_at=self.timestamp,
                            query=self.query, sample=self.sample, items=list(self.items),
                            chain_tip=self.chain, signers=self.signers)
        return _aggregate()(self.originator_id, self.originator_version, state)


class ItemAssessed(ReviewEvent):
    item: int
    verdict: Verdict
    severity: Severity | None = None
    note: str
    actor: str

    def change(self, state: ReviewState) -> None:
        state.assessments[self.item] = Assessment(
            item=self.item, verdict=self.verdict, severity=self.severity, note=self.note,
            actor=self.actor, at=self.timestamp)


class ReviewSignedOff(ReviewEvent):
    actor: str
    note: str
    findings: int

    def change(self, state: ReviewState) -> None:
        state.status = "signed_off"
        state.signed_off_by, state.signed_off_at = self.actor, self.timestamp
        state.sign_off_note = self.note


class ReviewCountersigned(ReviewEvent):
    """The second sign-off, by another auditor than the first (a tenant's option)."""

    actor: str
    note: str

    def change(self, state: ReviewState) -> None:
        state.countersigned_by, state.countersigned_at = self.actor, self.timestamp
        state.countersign_note = self.note


class ReviewClosed(ReviewEvent):
    actor: str

    def change(self, state: ReviewState) -> None:
        state.status = "closed"
        state.closed_by, state.closed_at = self.actor, self.timestamp
