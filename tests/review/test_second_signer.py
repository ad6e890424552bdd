"""A tenant may ask a second, distinct auditor to sign a review off before it closes
(INTERLOCK_REVIEW_SECOND_SIGNER): the rule in the Review aggregate, over HTTP and the CLI."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.cli.main import main
from interlock.domain.errors import InvalidRequestError, ReviewStateError, SameSignerError
from interlock.domain.review.aggregate import Review, signers_for
from interlock.domain.review.events import (
    QueryRecord,
    ReviewClosed,
    ReviewCountersigned,
    ReviewItem,
    ReviewSignedOff,
    SampleRecord,
)
from interlock.domain.review.service import Reviews
from interlock.projections import open_read_models
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk
from interlock.settings import Settings
from tests.review.history import ACTIVE, TENANT, History
from tests.review.test_evidence import verifier

KEYS = {f"key-{name}": {"id": name, "tenant": tenant, "roles": ["auditor"]}
        for name, tenant in (("rita", "acme"), ("ron", "acme"), ("eve", "globex"))}


def _review(signers: int) -> Review:
    item = ReviewItem(n=1, chat_id=str(uuid4()), version=3, ref="pay-1", tool="pay",
                      kind="approve", actor="tina")
    review = Review.open(
        tenant="acme", actor="rita", signers=signers,
        query=QueryRecord(name="custom", version=1, filter="true", params={}),
        sample=SampleRecord(size=1, strata=(), seed="s", population=1, strata_sizes={}),
        items=[item])
    review.assess(1, actor="rita", verdict="ok", note="")
    review.sign_off(actor="rita", note="all fine")
    return review


def test_one_signer_closes_alone_as_before() -> None:
    review = _review(signers=1)
    review.close(actor="rita")
    assert review.state.status == "closed"


def test_two_signers_need_a_second_distinct_auditor_before_close() -> None:
    review = _review(signers=2)
    assert review.awaits_second_signer
    with pytest.raises(ReviewStateError, match="second, distinct auditor"):
        review.close(actor="rita")
    with pytest.raises(SameSignerError, match=r"signed review .* off already"):
        review.sign_off(actor=" RITA ", note="again")  # the same person, however written
    review.sign_off(actor="ron", note="checked the sample too")
    review.close(actor="rita")
    kinds = [(type(e), getattr(e, "actor", None)) for e in review.collect_events()[-3:]]
    assert kinds == [(ReviewSignedOff, "rita"), (ReviewCountersigned, "ron"),
                     (ReviewClosed, "rita")]
    assert (review.state.countersigned_by, review.state.countersign_note) == (
        "ron", "checked the sample too")
    with pytest.raises(ReviewStateError, match="closed"):
        review.sign_off(actor="eve", note="")


def test_the_tenant_option_names_tenants_or_every_one() -> None:
    assert signers_for("acme", Settings(review_second_signer="acme, globex")
                       .second_signer_tenants()) == 2
    assert signers_for("initech", frozenset({"acme"})) == 1
    assert signers_for("initech", frozenset({"*"})) == 2
    with pytest.raises(InvalidRequestError):
        _review(signers=3)


@pytest.fixture
def http(history: History) -> Iterator[TestClient]:
    views = open_read_models(history.app, poll_interval=0.05)
    app = make_app(history.app, views, AuthConfig.from_mapping(KEYS))
    app.state.review_second_signer = frozenset({"acme"})  # as bootstrap sets it from settings
    with TestClient(app) as client:
        yield client
    views.close()


def _as(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer key-{name}"}


def test_over_http_the_second_signer_is_asked_and_the_first_is_refused(
    http: TestClient,
) -> None:
    opened = http.post("/v1/reviews", json={"query": "edited_then_approved", "size": 5,
                                            "seed": "s1"}, headers=_as("rita")).json()
    assert opened["signers"] == 2
    url = f"/v1/reviews/{opened['id']}"
    http.post(f"{url}/items/1/assessment", json={"verdict": "ok"}, headers=_as("rita"))
    assert http.post(f"{url}/sign-off", json={"note": "ok"}, headers=_as("rita")).status_code == 200
    early = http.post(f"{url}/close", headers=_as("rita"))
    assert (early.status_code, early.json()["error"]["code"]) == (409, "review_state")
    again = http.post(f"{url}/sign-off", json={"note": "me again"}, headers=_as("rita"))
    assert (again.status_code, again.json()["error"]["code"]) == (403, "same_signer")
    second = http.post(f"{url}/sign-off", json={"note": "seen"}, headers=_as("ron")).json()
    assert (second["status"], second["countersigned_by"]) == ("signed_off", "ron")
    closed = http.post(f"{url}/close", headers=_as("rita")).json()
    assert closed["status"] == "closed"
    other = http.post("/v1/reviews", json={"query": "edited_then_approved", "size": 5},
                      headers=_as("eve")).json()
    assert other["signers"] == 1  # globex did not ask for it


def test_an_evidence_pack_of_a_two_signer_review_verifies_only_once_countersigned(
    history: History, view: ReviewsView, tmp_path: Path,
) -> None:
    private, public = tmp_path / "cp.pem", tmp_path / "cp.pub"
    assert main(["audit", "keygen", "--private", str(private), "--public", str(public)]) == 0
    desk = ReviewDesk(Reviews(history.app), view, ACTIVE, frozenset({TENANT}))
    review = desk.open(TENANT, "rita", "custom", custom="kind != 'expire'", size=1, seed="e")
    desk.reviews.assess(review.id, 1, actor="rita", verdict="ok", note="")
    desk.reviews.sign_off(review.id, actor="head", note="done")

    def pack(name: str) -> tuple[int, str]:
        path = tmp_path / name
        assert main(["audit", "evidence", "--review", str(review.id), "--key", str(private),
                     "--output", str(path), "--store", history.store]) == 0
        return verifier(str(path), "--public-key", str(public))

    code, out = pack("once.zip")
    assert code == 1 and "the review needs a second signer and has none" in out
    desk.reviews.sign_off(review.id, actor="rosa", note="seen too")
    code, out = pack("twice.zip")
    assert (code, out.strip().splitlines()[-1]) == (0, "evidence pack verifies")
    with zipfile.ZipFile(tmp_path / "twice.zip") as z:
        findings = json.loads(z.read("findings.json"))
    assert (findings["signers"], findings["countersigned_by"]) == (2, "rosa")
