"""Compliance review: run review queries, open reviews of seeded samples, assess, sign off.

Every route needs the auditor role and sees only the caller's tenant (docs/review.md).
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import FileResponse

from interlock.api.auth import AuthConfig, Principal
from interlock.api.deps import PrincipalDep, ReadModelsDep, ServiceDep
from interlock.api.errors import ViewsBehindError
from interlock.api.evidence import MEDIA, evidence_download
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.api.schemas import (
    AssessmentIn,
    ReceiptList,
    ReceiptPublic,
    ReviewList,
    ReviewOpen,
    ReviewPublic,
    ReviewQueryAnswer,
    ReviewQueryRun,
    SignOffIn,
)
from interlock.domain import Interlock
from interlock.domain.errors import InternalError
from interlock.domain.receipts import Receipts
from interlock.domain.review.queries import SHIPPED, ReviewQuery
from interlock.domain.review.service import Reviews
from interlock.projections.interface import Queries, ReadModels
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk

router = APIRouter(prefix="/v1/reviews", tags=["reviews"], route_class=JsonRoute)


async def auditor(principal: PrincipalDep) -> Principal:
    principal.require("auditor")
    return principal


Auditor = Annotated[Principal, Depends(auditor)]


def review_desk(request: Request, service: ServiceDep, views: ReadModelsDep,
                who: Auditor) -> ReviewDesk:
    return desk_for(service, views, request.app.state.auth, who.tenant,
                    second_signer(request))


def second_signer(request: Request) -> frozenset[str]:
    """The tenants asking a second sign-off (INTERLOCK_REVIEW_SECOND_SIGNER, set by bootstrap)."""
    found: frozenset[str] = getattr(request.app.state, "review_second_signer", frozenset())
    return found


def desk_for(service: Interlock, views: ReadModels, auth: AuthConfig, tenant: str,
             second: frozenset[str] = frozenset()) -> ReviewDesk:
    """The desk over the views once they show every write committed before the request
    (the API's and the console's: one desk, one meaning of a query)."""
    position = service.position()
    try:
        views.wait(position)
    except TimeoutError:
        raise ViewsBehindError() from None
    principals = None if auth.keys is None else {
        p.id for p in auth.keys.values() if p.tenant == tenant}
    # Its queries read on a read replica that has applied the position, if there is one.
    return ReviewDesk(Reviews(service), reviews_view(views.at(ReviewsView.view_name, position)),
                      principals, second)


def reviews_view(views: Queries) -> ReviewsView:
    """The reviews read model of these read models (every SQL store keeps one)."""
    found = views.find(ReviewsView)
    if found is None:
        raise InternalError("these read models keep no reviews view")
    return found


Desk = Annotated[ReviewDesk, Depends(review_desk)]
Number = Annotated[int, Path(ge=1, le=10_000)]


@router.get("/queries", response_model=list[ReviewQuery], responses=errors())
def list_queries(who: Auditor) -> list[ReviewQuery]:
    """The shipped queries: name, version, filter and parameters (`custom` takes a filter)."""
    return list(SHIPPED.values())


@router.post("/queries/run", response_model=ReviewQueryAnswer, responses=errors())
def run_query(desk: Desk, who: Auditor, body: ReviewQueryRun) -> ReviewQueryAnswer:
    """The tenant's decisions a query selects, newest first."""
    bound, page = desk.run(who.tenant, body.query, body.params, body.filter, body.limit,
                           body.cursor)
    return ReviewQueryAnswer(query=bound.name, version=bound.version, filter=bound.filter,
                             params=bound.params, items=page.items, next_cursor=page.next_cursor)


@router.post("", status_code=201, response_model=ReviewPublic, responses=errors())
def open_review(desk: Desk, who: Auditor, body: ReviewOpen) -> ReviewPublic:
    """Open a review of a seeded, optionally stratified sample of a query's answer."""
    review = desk.open(who.tenant, who.id, body.query, params=body.params, custom=body.filter,
                       size=body.size, strata=body.strata, seed=body.seed)
    return ReviewPublic.of(review)


@router.get("", response_model=ReviewList, responses=errors())
def list_reviews(desk: Desk, who: Auditor) -> ReviewList:
    return ReviewList(items=desk.view.reviews(who.tenant))


@router.get("/receipts", response_model=ReceiptList, responses=errors(404))
def call_receipts(service: ServiceDep, who: Auditor, chat_id: UUID,
                  ref: Annotated[str, Query(min_length=1, max_length=1000)]) -> ReceiptList:
    """Who opened the console page of call `ref` of `chat_id` while it was pending, when,
    and the SHA-256 of the input it showed: one receipt per opening, oldest first."""
    receipts = Receipts(service).of_tenant_call(chat_id, ref, tenant=who.tenant)
    return ReceiptList(chat_id=str(chat_id), ref=ref,
                       items=[ReceiptPublic.of(r) for r in receipts])


@router.get("/{review_id}", response_model=ReviewPublic, responses=errors(404))
def get_review(service: ServiceDep, who: Auditor, review_id: UUID) -> ReviewPublic:
    return ReviewPublic.of(Reviews(service).get(review_id, tenant=who.tenant))


@router.post("/{review_id}/items/{n}/assessment", response_model=ReviewPublic,
             responses=errors(404, 409))
def assess(service: ServiceDep, who: Auditor, review_id: UUID, n: Number,
           body: AssessmentIn) -> ReviewPublic:
    """Assess one item: ok, or a finding with its severity and a note (not one's own call)."""
    review = Reviews(service).assess(review_id, n, actor=who.id, verdict=body.verdict,
                                     note=body.note, severity=body.severity, tenant=who.tenant)
    return ReviewPublic.of(review)


@router.post("/{review_id}/sign-off", response_model=ReviewPublic, responses=errors(404, 409))
def sign_off(service: ServiceDep, who: Auditor, review_id: UUID, body: SignOffIn) -> ReviewPublic:
    """Sign the review off once every item is assessed."""
    review = Reviews(service).sign_off(review_id, actor=who.id, note=body.note,
                                       tenant=who.tenant)
    return ReviewPublic.of(review)


@router.post("/{review_id}/close", response_model=ReviewPublic, responses=errors(404, 409))
def close(service: ServiceDep, who: Auditor, review_id: UUID) -> ReviewPublic:
    return ReviewPublic.of(Reviews(service).close(review_id, actor=who.id, tenant=who.tenant))


@router.get("/{review_id}/evidence", response_class=FileResponse, responses={
    **errors(404, 409), 200: {"content": {MEDIA: {"schema": {"type": "string",
                                                             "format": "binary"}}},
                              "description": "the signed evidence pack (a zip)"}})
def evidence_pack(request: Request, service: ServiceDep, who: Auditor,
                  review_id: UUID) -> FileResponse:
    """The signed-off review's evidence pack, as `interlock audit evidence` writes it: a
    fresh checkpoint signed with the server's key (409 `no_signing_key` without one)."""
    return evidence_download(service, request.app.state.signer, review_id, who.tenant)
