"""The reviewer's pages: run review queries, open a review of a seeded sample, assess its
items, sign off, close, download the signed evidence pack. Auditors only; every step goes
through the review desk and service the API uses (api/routers/reviews.py)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, Response

from interlock.api.auth import Principal
from interlock.api.deps import ReadModelsDep, ServiceDep
from interlock.api.evidence import evidence_download
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.reviews import desk_for, second_signer
from interlock.api.ui import review_forms as forms
from interlock.api.ui.render import checked_form, redirect, render
from interlock.api.ui.router import Visitor
from interlock.domain.errors import (
    ForbiddenError,
    InvalidRequestError,
    ReviewStateError,
    SameSignerError,
)
from interlock.domain.review.fields import FIELDS, KINDS
from interlock.domain.review.queries import CUSTOM, SHIPPED
from interlock.domain.review.sampling import MAX_SIZE, STRATA
from interlock.domain.review.service import Reviews
from interlock.reviewing import ReviewDesk

router = APIRouter(prefix="/reviews", route_class=JsonRoute)
PAGE = 50
Item = Annotated[int, Path(ge=1, le=MAX_SIZE)]
Short = Annotated[str, Query(max_length=100)]
Cursor = Annotated[str | None, Query(max_length=1000)]


def reviewer(who: Visitor) -> Principal:
    try:
        who.require("auditor")
    except ForbiddenError:
        raise ForbiddenError(f"The review pages are for auditors: {who.id} lacks the auditor "
                             "role.", principal=who.id, role="auditor") from None
    return who


Reviewer = Annotated[Principal, Depends(reviewer)]


def review_desk(request: Request, service: ServiceDep, views: ReadModelsDep,
                who: Reviewer) -> ReviewDesk:
    return desk_for(service, views, request.app.state.auth, who.tenant, second_signer(request))


Desk = Annotated[ReviewDesk, Depends(review_desk)]


# -- queries ------------------------------------------------------------------------------


@router.get("/queries", response_class=HTMLResponse)
def queries(request: Request, desk: Desk, who: Reviewer, query: Short = "",
            cursor: Cursor = None) -> Response:
    """The shipped queries; with `query`, its form and its answer (a page of decisions)."""
    context: dict[str, Any] = {"who": who, "shipped": list(SHIPPED.values()), "custom": CUSTOM,
                               "fields": FIELDS, "kinds": KINDS, "strata": STRATA,
                               "strata_words": forms.STRATA_WORDS, "chosen": query,
                               "raw": dict(request.query_params), "answer": None,
                               "rest": {k: v for k, v in request.query_params.items()
                                        if k != "cursor"}}
    if not query:
        return render(request, "review_queries.html", **context)
    chosen = forms.query_named(query)
    context["query"] = chosen
    try:
        params = forms.params_of(request.query_params, chosen)
        context["answer"] = desk.run(who.tenant, query, params,
                                     forms.custom_filter(request.query_params, query), PAGE,
                                     cursor or None)
    except InvalidRequestError as exc:  # a filter or parameter refused: fix it in place
        return render(request, "review_queries.html", exc.status, error=forms.refusal(exc),
                      **context)
    return render(request, "review_queries.html", **context)


@router.post("")
async def open_review(request: Request, desk: Desk, who: Reviewer) -> Response:
    data = await checked_form(request)
    name = data.get("query", "")
    chosen = forms.query_named(name)
    size, strata, seed = forms.sample_of(data)
    review = await run_in_threadpool(
        desk.open, who.tenant, who.id, name, params=forms.params_of(data, chosen),
        custom=forms.custom_filter(data, name), size=size, strata=strata, seed=seed)
    return redirect(request, f"/reviews/{review.id}")


# -- reviews ------------------------------------------------------------------------------


@router.get("", response_class=HTMLResponse)
def reviews(request: Request, desk: Desk, who: Reviewer) -> Response:
    return render(request, "reviews.html", who=who, reviews=desk.view.reviews(who.tenant))


def _page(request: Request, service: ServiceDep, who: Principal, review_id: UUID,
          status: int = 200, **notes: Any) -> Response:
    review = Reviews(service).get(review_id, tenant=who.tenant)
    return render(request, "review.html", status, who=who, review=review, s=review.state,
                  can_sign=request.app.state.signer is not None, **notes)


@router.get("/{review_id}", response_class=HTMLResponse)
def review_page(request: Request, service: ServiceDep, who: Reviewer,
                review_id: UUID) -> Response:
    return _page(request, service, who, review_id)


@router.post("/{review_id}/items/{n}")
async def assess(request: Request, service: ServiceDep, who: Reviewer, review_id: UUID,
                 n: Item) -> Response:
    data = await checked_form(request)
    try:
        verdict, severity, note = forms.assessment_of(data)
        await run_in_threadpool(Reviews(service).assess, review_id, n, actor=who.id,
                                verdict=verdict, severity=severity, note=note,
                                tenant=who.tenant)
    except (ForbiddenError, ReviewStateError, InvalidRequestError) as exc:
        return await run_in_threadpool(_page, request, service, who, review_id, exc.status,
                                       refused=n, error=forms.refusal(exc), code=exc.code,
                                       data=data)
    return redirect(request, f"/reviews/{review_id}#item-{n}")


@router.post("/{review_id}/sign-off")
async def sign_off(request: Request, service: ServiceDep, who: Reviewer,
                   review_id: UUID) -> Response:
    data = await checked_form(request)
    try:
        await run_in_threadpool(Reviews(service).sign_off, review_id, actor=who.id,
                                note=data.get("note", "").strip(), tenant=who.tenant)
    except (ReviewStateError, InvalidRequestError, SameSignerError) as exc:
        return await run_in_threadpool(_page, request, service, who, review_id, exc.status,
                                       refused="sign-off", error=forms.refusal(exc),
                                       code=exc.code, data=data)
    return redirect(request, f"/reviews/{review_id}")


@router.post("/{review_id}/close")
async def close(request: Request, service: ServiceDep, who: Reviewer,
                review_id: UUID) -> Response:
    await checked_form(request)
    await run_in_threadpool(Reviews(service).close, review_id, actor=who.id, tenant=who.tenant)
    return redirect(request, f"/reviews/{review_id}")


@router.get("/{review_id}/evidence")
def evidence(request: Request, service: ServiceDep, who: Reviewer,
             review_id: UUID) -> FileResponse:
    """The signed evidence pack, as `interlock audit evidence` writes it."""
    return evidence_download(service, request.app.state.signer, review_id, who.tenant)
