"""The approval inbox: pending interrupts across the tenant's chats."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Query

from interlock.api.deps import CurrentViews, Reader
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.api.schemas import MAX_LIMIT, Instant
from interlock.projections.interface import InboxFilter, InboxRow, Page
from interlock.projections.views.inbox import Decidable

router = APIRouter(prefix="/v1/interrupts", tags=["interrupts"], route_class=JsonRoute)


@router.get("", response_model=Page[InboxRow], responses=errors())
def list_interrupts(
    views: CurrentViews, who: Reader,
    status: Literal["pending"] = "pending",
    agent: Annotated[str | None, Query(max_length=200)] = None,
    tool: Annotated[str | None, Query(max_length=200)] = None,
    chat_id: UUID | None = None,
    older_than: Instant | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
    decidable: bool = False,
) -> Page[InboxRow]:
    """Pending interrupts, oldest first; `status` is always `pending` (the inbox).

    `decidable=true` lists only what the caller may decide now (their roles or groups,
    not asked or already voted by them). Held calls show their votes, quorum and deadline.
    """
    mine = Decidable(id=who.id, roles=frozenset(who.roles), groups=frozenset(who.groups))
    f = InboxFilter(tenant=who.tenant, agent=agent, tool=tool,
                    chat_id=str(chat_id) if chat_id else None, older_than=older_than,
                    decidable_by=mine if decidable else None)
    return views.inbox(f, limit, cursor)
