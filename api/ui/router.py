"""The console's pages: sign-in, inbox, decisions, a chat (one interrupt: see decide.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import chain
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse

from interlock.api.auth import Principal
from interlock.api.deps import CurrentViews, ReadModelsDep, ServiceDep
from interlock.api.dev_principals import COOKIE, console_visitor
from interlock.api.jsonbody import JsonRoute
from interlock.api.ui import oversight
from interlock.api.ui.charts import duration, oversight_charts, pending_label
from interlock.api.ui.forms_parse import whole_number
from interlock.api.ui.render import (
    base,
    checked_form,
    instant,
    redirect,
    render,
    sessions,
    zone,
)
from interlock.api.ui.views import chat_page, inbox_forks
from interlock.domain import Interlock
from interlock.domain.chat.policies import normalise_id
from interlock.domain.delegations import DelegationDesk
from interlock.domain.errors import (
    InvalidRequestError,
    UnauthenticatedError,
)
from interlock.projections.interface import DecisionFilter, InboxFilter, ReadModels
from interlock.projections.views.inbox import Decidable

router = APIRouter(route_class=JsonRoute)
PAGE = 50
TITLE_COUNT_CAP = 100  # the title says "100+" beyond this: a count never scans the inbox
AGES: dict[str, timedelta] = {"5m": timedelta(minutes=5), "1h": timedelta(hours=1),
                              "1d": timedelta(days=1)}
_MEDIA = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
Kind = Literal["", "respond", "restart", "approve", "edit", "reject", "expire", "withdraw"]
Short = Annotated[str | None, Query(max_length=200)]
Cursor = Annotated[str | None, Query(max_length=1000)]


def visitor(request: Request) -> Principal:
    found = sessions(request)
    return console_visitor(found.auth, request, found.principal(request))


Visitor = Annotated[Principal, Depends(visitor)]


@router.get("/", include_in_schema=False)
def home(request: Request) -> RedirectResponse:
    return redirect(request, "/inbox")


# -- sign-in ------------------------------------------------------------------------------


@router.get("/sign-in", response_class=HTMLResponse)
def sign_in_page(request: Request, next: Annotated[str, Query(max_length=1000)] = "") -> Response:
    if sessions(request).auth.dev_mode:
        return redirect(request, "/inbox")
    return render(request, "sign_in.html", next=next, error=None)


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    data = await checked_form(request)
    target = data.get("next", "")
    if not target.startswith(base(request) + "/") or target.startswith("//"):
        target = base(request) + "/inbox"  # only the console's own pages: no open redirect
    response = RedirectResponse(target, status_code=303)
    try:
        sessions(request).sign_in(data.get("api_key", ""), request, response)
    except UnauthenticatedError:
        return render(request, "sign_in.html", 401, next=target,
                      error="That API key is not valid. Check it and try again.")
    return response


@router.post("/sign-out")
async def sign_out_now(request: Request) -> Response:
    await checked_form(request)
    response = redirect(request, "/sign-in")
    sessions(request).sign_out(request, response)
    return response


# -- dev mode: act as a named principal (--dev-principals) ------------------------------


@router.post("/dev-as")
async def dev_as(request: Request, who: Visitor) -> Response:
    """The picker: a cookie names the dev principal this browser acts as (blank: dev)."""
    data = await checked_form(request)
    auth, name = sessions(request).auth, data.get("as", "")
    if not auth.dev_mode or (name and name not in auth.dev):
        raise InvalidRequestError(f"no dev principal is named {name!r}", field="as")
    target = data.get("next", "")
    if not target.startswith(base(request) + "/") or target.startswith("//"):
        target = base(request) + "/inbox"  # the console's own pages only
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, name, httponly=True, samesite="strict",
                        path=base(request) or "/")
    return response


# -- inbox --------------------------------------------------------------------------------


def inbox_filter(
    who: Visitor, service: ServiceDep, agent: Short = None, tool: Short = None,
    age: Literal["", "5m", "1h", "1d"] = "", order: Literal["oldest", "newest"] = "oldest",
    show: Literal["all", "mine"] = "all",
) -> InboxFilter:
    """`show=mine`: what the visitor may decide, by their roles and groups and those lent
    to them by a delegation in force (the page then says which vote each one takes)."""
    now = datetime.now(UTC)
    older = now - AGES[age] if age else None
    mine = None
    if show == "mine":
        roles, groups = set(who.roles), set(who.groups)
        for d in DelegationDesk(service).load(who.tenant).granted.values():
            if normalise_id(d.delegate) == normalise_id(who.id) and d.active(now):
                roles, groups = roles | set(d.roles), groups | set(d.groups)
        mine = Decidable(id=who.id, roles=frozenset(roles), groups=frozenset(groups))
    return InboxFilter(tenant=who.tenant, agent=agent or None, tool=tool or None,
                       older_than=older, newest_first=order == "newest",
                       decidable_by=mine, partial=True)


InboxQuery = Annotated[InboxFilter, Depends(inbox_filter)]


def _inbox(service: Interlock, views: ReadModels, f: InboxFilter, cursor: str | None
           ) -> dict[str, Any]:
    rows = views.inbox(f, PAGE, cursor or None)
    count = _count(views, InboxFilter(tenant=f.tenant))
    filtered = f != InboxFilter(tenant=f.tenant, newest_first=f.newest_first, partial=f.partial)
    heading = f"{_count(views, f)} of {count} pending match" if filtered else f"{count} pending"
    return {"page": rows, "count": count, "heading": heading, "filtered": filtered,
            "now": datetime.now(UTC),
            "forks": inbox_forks(service, rows.items, f.tenant or "")}


def _count(views: ReadModels, f: InboxFilter) -> str:
    """How many match, "100+" beyond the cap: a count never scans the inbox."""
    found = views.inbox_count(f, TITLE_COUNT_CAP)
    return f"{min(found, TITLE_COUNT_CAP)}{'+' if found > TITLE_COUNT_CAP else ''}"


@router.get("/inbox", response_class=HTMLResponse)
def inbox(request: Request, service: ServiceDep, views: CurrentViews, who: Visitor,
          f: InboxQuery, cursor: Cursor = None) -> Response:
    return render(request, "inbox.html", who=who, f=f, query=request.url.query,
                  age=request.query_params.get("age", ""), **_inbox(service, views, f, cursor))


@router.get("/inbox/rows", response_class=HTMLResponse)
def inbox_rows(request: Request, service: ServiceDep, views: CurrentViews, f: InboxQuery,
               cursor: Cursor = None) -> Response:
    """The inbox's rows alone: the open page polls this and swaps them in."""
    context = _inbox(service, views, f, cursor)
    response = render(request, "_inbox_rows.html", **context)
    response.headers["X-Inbox-Count"] = context["count"]
    response.headers["X-Inbox-Heading"] = context["heading"]
    return response


# -- decisions ----------------------------------------------------------------------------


def decision_filter(
    who: Visitor, actor: Short = None, agent: Short = None, tool: Short = None,
    kind: Kind = "", since: Short = None, until: Short = None, tz: Short = None,
) -> DecisionFilter:
    """`since` and `until` without an offset are in `tz`, the browser's zone (else UTC)."""
    where = zone(tz)
    return DecisionFilter(tenant=who.tenant, actor=actor or None, agent=agent or None,
                          tool=tool or None, kind=kind or None,
                          since=instant("since", since, where),
                          until=instant("until", until, where))


DecisionQuery = Annotated[DecisionFilter, Depends(decision_filter)]


@router.get("/decisions", response_class=HTMLResponse)
def decisions(request: Request, views: CurrentViews, who: Visitor, f: DecisionQuery,
              cursor: Cursor = None) -> Response:
    page = views.decisions(f, PAGE, cursor or None)
    raw = {k: v for k, v in request.query_params.items() if k != "cursor"}
    return render(request, "decisions.html", who=who, page=page, raw=raw)


@router.get("/decisions/stats", response_class=HTMLResponse)
def decision_stats(request: Request, service: ServiceDep, views: ReadModelsDep, who: Visitor,
                   f: DecisionQuery) -> Response:
    """Counts and percentiles, and the oversight charts (drawn here, as SVG)."""
    raw = dict(request.query_params)
    stats, figures = oversight.read(service, views, f)  # one read of the summary for both
    return render(request, "stats.html", who=who, stats=stats, raw=raw,
                  figures=figures, charts=oversight_charts(figures) if figures else None,
                  duration=duration, pending_label=pending_label)


@router.get("/decisions/export")
def export(views: CurrentViews, f: DecisionQuery,
           format: Literal["csv", "jsonl"] = "csv") -> StreamingResponse:
    """The matching decisions as a download (streamed, page by page)."""
    chunks = views.export_decisions(f, format)
    first = next(chunks, "")  # a refused filter fails here, as a page, not a cut stream
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    disposition = f'attachment; filename="decisions-{stamp}.{format}"'
    return StreamingResponse(chain([first], chunks), media_type=_MEDIA[format],
                             headers={"Content-Disposition": disposition})


# -- a chat -------------------------------------------------------------------------------


@router.get("/chats/{chat_id}", response_class=HTMLResponse)
def chat(request: Request, chat_id: UUID, service: ServiceDep, views: CurrentViews,
         who: Visitor, version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
         ) -> Response:
    return render(request, "chat.html", who=who, c=chat_page(service, who, chat_id, version))


@router.post("/chats/{chat_id}/fork")
async def fork(request: Request, chat_id: UUID, service: ServiceDep, who: Visitor) -> Response:
    """Fork from the version shown: a new chat holding the history up to it (the requester's
    right, as over the API); the new chat's page answers."""
    data = await checked_form(request)
    who.require("requester")
    raw = data.get("version", "")
    version = whole_number(raw, 1, 2**31 - 1)
    if version is None:
        raise InvalidRequestError("version must be a whole number of at least 1",
                                  version=raw[:20])
    made = await run_in_threadpool(service.fork, chat_id, version, actor=who.id,
                                   tenant=who.tenant)
    return redirect(request, f"/chats/{made.id}")
