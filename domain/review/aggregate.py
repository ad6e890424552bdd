"""The Review aggregate: open from a sample, assess each item, sign off, close."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.utils import register_topic

from interlock.domain.chat.events import now
from interlock.domain.chat.policies import normalise_id
from interlock.domain.errors import (
    InvalidRequestError,
    ReviewStateError,
    SameSignerError,
    SegregationOfDutiesError,
)
from interlock.domain.review import events as ev
from interlock.domain.review.events import (
    QueryRecord,
    ReviewItem,
    ReviewState,
    SampleRecord,
    Severity,
    Verdict,
)

MAX_NOTE = 4000
Signer = Callable[[str | None, ev.ReviewEvent], str]
EVERY_TENANT = "*"


def signers_for(tenant: str, second_signer: Collection[str]) -> int:
    """How many distinct auditors sign a review of `tenant` off: 2 when the tenant is named
    in INTERLOCK_REVIEW_SECOND_SIGNER (or it is `*`), else 1."""
    return 2 if tenant in second_signer or EVERY_TENANT in second_signer else 1


class Review:
    """A second-line review of sampled decisions, as a stream of events."""

    def __init__(self, review_id: UUID, version: int, state: ReviewState) -> None:
        self.id, self.version, self.state = review_id, version, state
        self.pending_events: list[ev.ReviewEvent] = []

    def collect_events(self) -> list[ev.ReviewEvent]:
        collected, self.pending_events = self.pending_events, []
        return collected

    def _trigger(self, event_class: type[ev.ReviewEvent], **data: Any) -> None:
        event = event_class(originator_id=self.id, originator_version=self.version + 1,
                            timestamp=now(), **data)
        event.mutate(self)
        self.pending_events.append(event)

    def seal(self, sign: Signer) -> None:
        """Chain each pending event to the one before it, as a chat's are."""
        tip, sealed = self.state.chain_tip, []
        for event in self.pending_events:
            tip = sign(tip, event)
            sealed.append(event.model_copy(update={"chain": tip}))
        self.pending_events, self.state.chain_tip = sealed, tip

    # -- commands ----------------------------------------------------------------------------

    @classmethod
    def open(cls, *, tenant: str, actor: str, query: QueryRecord, sample: SampleRecord,
             items: Sequence[ReviewItem], review_id: UUID | None = None,
             signers: int = 1) -> Review:
        """`signers`: 2 when the tenant asks a second, distinct sign-off before close."""
        if signers not in (1, 2):
            raise InvalidRequestError("a review is signed off by 1 or 2 auditors",
                                      signers=signers)
        opened = ev.ReviewOpened(originator_id=review_id or uuid4(), originator_version=1,
                                 timestamp=now(), tenant=tenant, actor=actor, query=query,
                                 sample=sample, items=tuple(items), signers=signers)
        review = opened.mutate(None)
        review.pending_events.append(opened)
        return review

    def assess(self, item: int, *, actor: str, verdict: Verdict, note: str,
               severity: Severity | None = None, now: ReviewItem | None = None) -> None:
        """`now`: the item's call as its chat's log holds it at this moment (a vote cast
        since the review opened makes its voter a party too)."""
        self._check_open()
        found = self.item(item)
        if item in self.state.assessments:
            done = self.state.assessments[item]
            raise ReviewStateError(self.id, f"item {item} was assessed by {done.actor}",
                                   item=item, assessed_by=done.actor)
        for parties in (found, now):
            if parties is not None:
                _check_segregation(self.id, parties, actor)
        _check_verdict(verdict, severity, note)
        self._trigger(ev.ItemAssessed, item=item, verdict=verdict, severity=severity,
                      note=note, actor=actor)

    def sign_off(self, *, actor: str, note: str = "") -> None:
        """Sign off every assessed item; under two signers the second, distinct auditor's
        sign-off countersigns the first."""
        if self.awaits_second_signer:
            self._countersign(actor, note)
            return
        self._check_open()
        left = [i.n for i in self.state.items if i.n not in self.state.assessments]
        if left:
            raise ReviewStateError(self.id, f"{len(left)} item(s) are not assessed yet",
                                   unassessed=left[:50])
        _check_note(note)
        findings = sum(a.verdict == "finding" for a in self.state.assessments.values())
        self._trigger(ev.ReviewSignedOff, actor=actor, note=note, findings=findings)

    @property
    def awaits_second_signer(self) -> bool:
        """Signed off once, where the tenant asks two: the second sign-off is due."""
        s = self.state
        return s.status == "signed_off" and s.signers > 1 and s.countersigned_by is None

    def _countersign(self, actor: str, note: str) -> None:
        first = self.state.signed_off_by or ""
        if normalise_id(actor) == normalise_id(first):
            raise SameSignerError(self.id, actor)
        _check_note(note)
        self._trigger(ev.ReviewCountersigned, actor=actor, note=note)

    def close(self, *, actor: str) -> None:
        if self.state.status != "signed_off":
            raise ReviewStateError(self.id, f"only a signed-off review closes (it is "
                                   f"{self.state.status})", status=self.state.status)
        if self.awaits_second_signer:
            raise ReviewStateError(
                self.id, f"signed off by {self.state.signed_off_by} only: this tenant asks a "
                "second, distinct auditor to sign it off before it closes",
                status=self.state.status, signers=self.state.signers,
                signed_off_by=self.state.signed_off_by)
        self._trigger(ev.ReviewClosed, actor=actor)

    def item(self, n: int) -> ReviewItem:
        if not 1 <= n <= len(self.state.items):
            raise InvalidRequestError(f"review {self.id} has items 1 to {len(self.state.items)}",
                                      item=n)
        return self.state.items[n - 1]

    def _check_open(self) -> None:
        if self.state.status != "open":
            raise ReviewStateError(self.id, f"the review is {self.state.status}",
                                   status=self.state.status)


def _check_segregation(review_id: UUID, item: ReviewItem, actor: str) -> None:
    """Not who requested, edited or decided the call (ids compared normalised)."""
    me = normalise_id(actor)
    roles = [role for role, who in (("requested", item.requested_by),
                                    ("edited", item.edited_by), ("decided", item.decided_by))
             if me in {normalise_id(p) for p in who}]
    if roles:
        raise SegregationOfDutiesError(review_id, item.n, actor, roles)


def _check_verdict(verdict: Verdict, severity: Severity | None, note: str) -> None:
    _check_note(note)
    if verdict == "finding" and (severity is None or not note.strip()):
        raise InvalidRequestError("a finding needs a severity and a note")
    if verdict == "ok" and severity is not None:
        raise InvalidRequestError("an ok has no severity")


def _check_note(note: str) -> None:
    if len(note) > MAX_NOTE:
        raise InvalidRequestError(f"a note holds at most {MAX_NOTE} characters")


register_topic("interlock:Review", Review)
