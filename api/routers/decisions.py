"""The decision log: who decided what, when, about which input; stats and export."""

from __future__ import annotations

from itertools import chain
from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from interlock.api.deps import CurrentViews, Reader
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.api.schemas import MAX_LIMIT, Instant
from interlock.projections.interface import DecisionFilter, DecisionRow, DecisionStats, Page

router = APIRouter(prefix="/v1/decisions", tags=["decisions"], route_class=JsonRoute)
_MEDIA = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}


async def decision_filter(
    who: Reader,
    tool: Annotated[str | None, Query(max_length=200)] = None,
    actor: Annotated[str | None, Query(max_length=200)] = None,
    chat_id: UUID | None = None,
    since: Instant | None = None,
    until: Instant | None = None,
) -> DecisionFilter:
    return DecisionFilter(tenant=who.tenant, tool=tool, actor=actor,
                          chat_id=str(chat_id) if chat_id else None, since=since, until=until)


Filter = Annotated[DecisionFilter, Depends(decision_filter)]


@router.get("", response_model=Page[DecisionRow], responses=errors())
def list_decisions(
    views: CurrentViews, f: Filter,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
) -> Page[DecisionRow]:
    """Responded and Restarted decisions, in the order they were made."""
    return views.decisions(f, limit, cursor)


@router.get("/stats", response_model=DecisionStats, responses=errors())
def decision_stats(views: CurrentViews, f: Filter) -> DecisionStats:
    """Counts by tool and actor; time from interrupt to decision, p50 and p95."""
    return views.decision_stats(f)


@router.get("/export", responses={
    **errors(), 200: {"content": {m: {"schema": {"type": "string"}} for m in _MEDIA.values()},
                      "description": "CSV with a header row, or one JSON object a line."}})
def export_decisions(
    views: CurrentViews, f: Filter, format: Literal["csv", "jsonl"] = "jsonl"
) -> StreamingResponse:
    """The decisions matching the filters, streamed for reviewers."""
    chunks = views.export_decisions(f, format)
    first = next(chunks, "")  # a refused filter is a typed error here, not a broken stream
    return StreamingResponse(chain([first], chunks), media_type=_MEDIA[format])
