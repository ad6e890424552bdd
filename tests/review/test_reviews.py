"""Reviews: seeded samples, assessments under segregation of duties, sign-off and close."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

import pytest
from eventsourcing.application import ProcessingEvent

from interlock.domain.chat.approval_events import ApprovalVoted
from interlock.domain.errors import (
    InvalidRequestError,
    ReviewNotFoundError,
    ReviewStateError,
    SegregationOfDutiesError,
)
from interlock.domain.review.events import ItemAssessed, ReviewClosed, ReviewOpened, ReviewSignedOff
from interlock.domain.review.service import Reviews
from interlock.projections import SqlReadModels
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk
from tests.review.history import ACTIVE, TENANT, History

EVERYTHING = "kind != 'expire'"


@pytest.fixture
def desk(history: History, view: ReviewsView) -> ReviewDesk:
    return ReviewDesk(Reviews(history.app), view, ACTIVE)


def _keys(desk: ReviewDesk, seed: str, size: int = 4, strata: tuple[str, ...] = ()) -> list[str]:
    review = desk.open(TENANT, "rita", "custom", custom=EVERYTHING, size=size, strata=strata,
                       seed=seed)
    return [f"{i.chat_id}#{i.version}" for i in review.state.items]


def test_the_same_seed_draws_the_same_sample_and_another_seed_another(desk: ReviewDesk) -> None:
    first, again = _keys(desk, "s1"), _keys(desk, "s1")
    assert first == again and len(first) == 4
    others = {frozenset(_keys(desk, seed)) for seed in ("s2", "s3", "s4")}
    assert others - {frozenset(first)}  # 4 of 9: a seed draws another set but 1 in 126


def test_strata_give_every_approver_a_seat(desk: ReviewDesk) -> None:
    review = desk.open(TENANT, "rita", "custom", custom="kind = 'approve'", size=3,
                       strata=("actor",), seed="x")
    assert sorted(i.actor for i in review.state.items) == ["bob", "dave", "mallory"]
    sample = review.state.sample
    assert (sample.seed, sample.strata, sample.population) == ("x", ("actor",), 8)
    assert sample.strata_sizes == {"bob": 5, "dave": 2, "mallory": 1}


def test_the_review_records_its_query_version_parameters_and_seed(
    desk: ReviewDesk, history: History,
) -> None:
    review = desk.open(TENANT, "rita", "fast_approval", params={"seconds": 46}, size=2)
    [opened] = history.app.events.get(review.id)
    assert isinstance(opened, ReviewOpened) and opened.actor == "rita"
    assert (opened.query.name, opened.query.version, opened.query.params) == (
        "fast_approval", 1, {"seconds": 46})
    assert len(opened.sample.seed) == 16 and opened.sample.population == 4  # a seed was made


def test_a_reviewer_may_not_assess_what_they_requested_edited_or_decided(
    desk: ReviewDesk, history: History,
) -> None:
    review = desk.open(TENANT, "rita", "edited_then_approved", size=1, seed="s")
    [item] = review.state.items
    assert (item.requested_by, item.edited_by, item.decided_by) == (
        ("alice",), ("carol",), ("bob", "carol"))
    reviews = desk.reviews
    for who, roles in (("Alice", ["requested"]), ("carol ", ["edited", "decided"]),
                       ("bob", ["decided"])):
        with pytest.raises(SegregationOfDutiesError) as refused:
            reviews.assess(review.id, 1, actor=who, verdict="ok", note="")
        assert refused.value.details["roles"] == roles and refused.value.status == 403
    assert len(list(history.app.events.get(review.id))) == 1


def test_assess_sign_off_and_close_are_events_with_their_actor(
    desk: ReviewDesk, history: History, models: SqlReadModels, view: ReviewsView,
) -> None:
    review = desk.open(TENANT, "rita", "custom", custom=EVERYTHING, size=2, seed="s")
    reviews = desk.reviews
    with pytest.raises(ReviewStateError, match="2 item"):
        reviews.sign_off(review.id, actor="rita")
    reviews.assess(review.id, 1, actor="rita", verdict="ok", note="fine")
    with pytest.raises(ReviewStateError, match="assessed by rita"):
        reviews.assess(review.id, 1, actor="ron", verdict="ok", note="")
    with pytest.raises(InvalidRequestError, match="severity and a note"):
        reviews.assess(review.id, 2, actor="ron", verdict="finding", note="")
    with pytest.raises(InvalidRequestError, match="items 1 to 2"):
        reviews.assess(review.id, 3, actor="ron", verdict="ok", note="")
    reviews.assess(review.id, 2, actor="ron", verdict="finding", severity="high", note="no why")
    with pytest.raises(ReviewStateError, match="only a signed-off review closes"):
        reviews.close(review.id, actor="rita")
    reviews.sign_off(review.id, actor="head", note="one finding")
    with pytest.raises(ReviewStateError, match="signed_off"):
        reviews.assess(review.id, 1, actor="x", verdict="ok", note="")
    reviews.close(review.id, actor="head")
    events = list(history.app.events.get(review.id))
    assert [(type(e), getattr(e, "actor", None)) for e in events] == [
        (ReviewOpened, "rita"), (ItemAssessed, "rita"), (ItemAssessed, "ron"),
        (ReviewSignedOff, "head"), (ReviewClosed, "head")]
    models.catch_up()
    [row] = view.reviews(TENANT)
    assert (row.status, row.assessed, row.findings, row.signed_off_by) == (
        "closed", 2, 1, "head")


def test_another_tenants_review_or_a_chat_is_not_found(desk: ReviewDesk, history: History) -> None:
    review = desk.open(TENANT, "rita", "custom", custom=EVERYTHING, size=1, seed="s")
    with pytest.raises(ReviewNotFoundError):
        desk.reviews.get(review.id, tenant="other")
    with pytest.raises(ReviewNotFoundError):
        desk.reviews.get(history.chats["fast"])


def test_the_reviews_view_rebuilds_from_the_log_to_the_same_rows(
    desk: ReviewDesk, models: SqlReadModels, view: ReviewsView,
) -> None:
    review = desk.open(TENANT, "rita", "custom", custom=EVERYTHING, size=3, seed="r")
    desk.reviews.assess(review.id, 1, actor="rita", verdict="ok", note="")
    models.catch_up()
    before, reviews = view.dump(), view.reviews(TENANT)
    models.runner("reviews").rebuild()
    assert view.dump() == before and len(before) == 10  # nine decided, one expired
    assert view.reviews(TENANT) == reviews and reviews[0].assessed == 1


def test_a_vote_cast_after_the_review_opened_still_bars_its_voter(
    desk: ReviewDesk, history: History,
) -> None:
    """Who took part is read from the chat's log again at each assessment (a vote written
    since, here straight into the store, counts)."""
    review = desk.open(TENANT, "rita", "custom", custom="kind = 'approve'", size=9, seed="s")
    item = next(i for i in review.state.items if i.actor == "bob")
    chat = history.app.get_chat(UUID(item.chat_id))
    assert "ron" not in {*item.requested_by, *item.edited_by, *item.decided_by}
    plant = ApprovalVoted(originator_id=chat.id, originator_version=chat.version + 1,
                          timestamp=history.base + timedelta(days=3), ref=item.ref, name="pay",
                          vote="approve", actor="ron", input_sha256="0" * 64, outcome="approved")
    sealed = plant.model_copy(update={"chain": history.app.sealer.sign(chat.state.chain_tip,
                                                                        plant)})
    processing: ProcessingEvent[UUID] = ProcessingEvent()
    processing.events.append(sealed)
    history.app._record(processing)
    with pytest.raises(SegregationOfDutiesError, match="ron may not assess"):
        desk.reviews.assess(review.id, item.n, actor="ron", verdict="ok", note="")
