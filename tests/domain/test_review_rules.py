"""The Review aggregate's rules, pure: no store, no I/O, no service.

A review is opened from a sample, each item assessed once by someone who took no part in
its call, signed off when every item is assessed, then closed. Each step the state refuses
raises a typed error and records nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.domain import OriginatorVersionError

from interlock.domain.errors import (
    InterlockError,
    InvalidRequestError,
    ReviewStateError,
    SegregationOfDutiesError,
)
from interlock.domain.review import events as ev
from interlock.domain.review.aggregate import MAX_NOTE, Review
from interlock.domain.review.events import QueryRecord, ReviewItem, SampleRecord

QUERY = QueryRecord(name="all", version=1, filter="", params={})
SAMPLE = SampleRecord(size=2, strata=(), seed="s", population=2, strata_sizes={"": 2})


def item(n: int, **parties: tuple[str, ...]) -> ReviewItem:
    return ReviewItem(n=n, chat_id=f"c{n}", version=3, ref=f"r{n}", tool="pay",
                      kind="approve", actor="dave", **parties)


def opened(*items: ReviewItem) -> Review:
    """A review of `items` (two plain ones by default), its opening collected."""
    review = Review.open(tenant="t1", actor="erin", query=QUERY, sample=SAMPLE,
                         items=items or (item(1), item(2)))
    review.collect_events()
    return review


def signed_off() -> Review:
    review = opened()
    review.assess(1, actor="rita", verdict="ok", note="")
    review.assess(2, actor="rita", verdict="finding", severity="high", note="paid twice")
    review.sign_off(actor="rita", note="one finding")
    review.collect_events()
    return review


def refused(review: Review, error: type[InterlockError], step: Callable[[], None]
            ) -> InterlockError:
    """`step` must raise `error` and leave the review exactly as it was."""
    before, version = review.state.model_copy(deep=True), review.version
    with pytest.raises(error) as caught:
        step()
    assert review.pending_events == [] and review.version == version
    assert review.state == before
    return caught.value


# -- assessing ---------------------------------------------------------------------------


def test_an_assessment_is_recorded_with_its_verdict_and_actor() -> None:
    review = opened()
    review.assess(2, actor="rita", verdict="finding", severity="low", note="late")
    [assessed] = review.collect_events()
    assert isinstance(assessed, ev.ItemAssessed) and assessed.originator_version == 2
    assert (assessed.item, assessed.verdict, assessed.severity, assessed.actor) == (
        2, "finding", "low", "rita")
    assert review.state.assessments[2].note == "late" and review.version == 2


@pytest.mark.parametrize("n", [0, 3, -1])
def test_an_item_outside_the_sample_is_refused(n: int) -> None:
    review = opened()
    error = refused(review, InvalidRequestError,
                    lambda: review.assess(n, actor="rita", verdict="ok", note=""))
    assert error.details["item"] == n


def test_an_item_is_assessed_once() -> None:
    review = opened()
    review.assess(1, actor="rita", verdict="ok", note="")
    review.collect_events()
    error = refused(review, ReviewStateError,
                    lambda: review.assess(1, actor="sam", verdict="ok", note=""))
    assert error.details["assessed_by"] == "rita" and error.details["item"] == 1


@pytest.mark.parametrize(("role", "who"), [("requested", "Dave "), ("edited", "DAVE"),
                                           ("decided", "dave")])
def test_who_took_part_in_the_call_may_not_assess_it(role: str, who: str) -> None:
    review = opened(item(1, **{f"{role}_by": ("dave",)}))
    error = refused(review, SegregationOfDutiesError,
                    lambda: review.assess(1, actor=who, verdict="ok", note=""))
    assert error.details["roles"] == [role]  # ids compared normalised


def test_a_party_since_the_review_opened_may_not_assess_it_either() -> None:
    review = opened()
    now = item(1, decided_by=("vic",))  # vic voted on the call after the sample was drawn
    error = refused(review, SegregationOfDutiesError,
                    lambda: review.assess(1, actor="vic", verdict="ok", note="", now=now))
    assert error.details["roles"] == ["decided"]


@pytest.mark.parametrize(("verdict", "severity", "note"), [
    ("finding", None, "no severity"),
    ("finding", "high", "   "),  # a finding says what was found
    ("ok", "low", ""),  # an ok has no severity
    ("ok", None, "x" * (MAX_NOTE + 1)),
])
def test_a_verdict_must_be_well_formed(verdict: Any, severity: Any, note: str) -> None:
    review = opened()
    refused(review, InvalidRequestError, lambda: review.assess(
        1, actor="rita", verdict=verdict, severity=severity, note=note))


def test_a_note_of_the_longest_length_is_taken() -> None:
    review = opened()
    review.assess(1, actor="rita", verdict="ok", note="x" * MAX_NOTE)
    assert len(review.collect_events()) == 1


# -- signing off and closing ---------------------------------------------------------------


def test_sign_off_waits_for_every_item() -> None:
    review = opened()
    review.assess(2, actor="rita", verdict="ok", note="")
    review.collect_events()
    error = refused(review, ReviewStateError, lambda: review.sign_off(actor="rita"))
    assert error.details["unassessed"] == [1]


def test_sign_off_counts_the_findings() -> None:
    review = opened()
    review.assess(1, actor="rita", verdict="ok", note="")
    review.assess(2, actor="rita", verdict="finding", severity="high", note="paid twice")
    review.sign_off(actor="sam", note="ok")
    signed = review.collect_events()[-1]
    assert isinstance(signed, ev.ReviewSignedOff) and signed.findings == 1
    assert (review.state.status, review.state.signed_off_by) == ("signed_off", "sam")


def test_a_sign_off_note_is_bounded() -> None:
    review = opened()
    review.assess(1, actor="rita", verdict="ok", note="")
    review.assess(2, actor="rita", verdict="ok", note="")
    review.collect_events()
    refused(review, InvalidRequestError,
            lambda: review.sign_off(actor="rita", note="x" * (MAX_NOTE + 1)))


@pytest.mark.parametrize("step", ["assess", "sign_off"])
def test_a_signed_off_review_takes_no_assessment_or_second_sign_off(step: str) -> None:
    review = signed_off()
    action = {"assess": lambda: review.assess(1, actor="sam", verdict="ok", note=""),
              "sign_off": lambda: review.sign_off(actor="sam")}[step]
    error = refused(review, ReviewStateError, action)
    assert error.details["status"] == "signed_off"


def test_only_a_signed_off_review_closes() -> None:
    review = opened()
    error = refused(review, ReviewStateError, lambda: review.close(actor="erin"))
    assert error.details["status"] == "open"
    review = signed_off()
    review.close(actor="erin")
    [closed] = review.collect_events()
    assert isinstance(closed, ev.ReviewClosed) and review.state.status == "closed"


@pytest.mark.parametrize("step", ["assess", "sign_off", "close"])
def test_a_closed_review_takes_nothing(step: str) -> None:
    review = signed_off()
    review.close(actor="erin")
    review.collect_events()
    action = {"assess": lambda: review.assess(2, actor="sam", verdict="ok", note=""),
              "sign_off": lambda: review.sign_off(actor="sam"),
              "close": lambda: review.close(actor="erin")}[step]
    error = refused(review, ReviewStateError, action)
    assert error.details["status"] == "closed"


# -- replay --------------------------------------------------------------------------------


def test_the_events_replay_to_the_same_review() -> None:
    review_id = uuid4()
    review = Review.open(tenant="t1", actor="erin", query=QUERY, sample=SAMPLE,
                         items=(item(1), item(2)), review_id=review_id)
    review.assess(1, actor="rita", verdict="ok", note="")
    review.assess(2, actor="rita", verdict="finding", severity="low", note="late")
    review.sign_off(actor="rita")
    review.close(actor="erin")
    events = review.collect_events()
    replayed = None
    for event in events:
        replayed = event.mutate(replayed)
    assert replayed is not None and replayed.id == review_id
    assert (replayed.version, replayed.state) == (5, review.state)


def test_an_event_out_of_order_is_refused() -> None:
    review = opened()
    late = ev.ReviewClosed(originator_id=review.id, originator_version=3,
                           timestamp=review.state.opened_at, actor="erin")
    with pytest.raises(OriginatorVersionError):
        late.mutate(review)
    assert review.version == 1 and review.state.status == "open"
