"""The delegation page: an approver's delegations (granted by them and to them), a form to
grant one and a button to revoke. Every step goes through `DelegationDesk`, the domain
service behind /v1/delegations, with the console's session and CSRF checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from interlock.api.auth import Principal
from interlock.api.deps import ServiceDep
from interlock.api.jsonbody import JsonRoute
from interlock.api.ui.render import checked_form, instant, redirect, render, zone
from interlock.api.ui.router import Visitor
from interlock.api.ui.stages import short_id
from interlock.domain import Interlock
from interlock.domain.chat.policies import normalise_id
from interlock.domain.delegations import (
    Delegation,
    DelegationDesk,
    DelegationRequest,
    Delegations,
)
from interlock.domain.errors import (
    DelegationNotFoundError,
    ForbiddenError,
    InvalidRequestError,
)

router = APIRouter(prefix="/delegations", route_class=JsonRoute)
ROLE, GROUP = "role.", "group."  # a checkbox per lendable role or group: role.treasury
Said = Annotated[str | None, Query(max_length=100)]
Refusal = InvalidRequestError | ForbiddenError | DelegationNotFoundError


@dataclass(frozen=True)
class Book:
    """The page's lists, newest first: granted by the visitor, to them, and the tenant's
    others (an admin's or an auditor's view)."""

    by_me: list[Delegation]
    to_me: list[Delegation]
    others: list[Delegation]


def book_of(book: Delegations, who: Principal) -> Book:
    me = normalise_id(who.id)
    seen = book.visible_to(who.decider(), "auditor" in who.roles)
    newest = sorted(seen, key=lambda d: d.granted_at, reverse=True)
    return Book(by_me=[d for d in newest if normalise_id(d.delegator) == me],
                to_me=[d for d in newest if normalise_id(d.delegate) == me],
                others=[d for d in newest if me not in (normalise_id(d.delegator),
                                                        normalise_id(d.delegate))])


def lendable(who: Principal) -> tuple[list[str], list[str]]:
    """The roles and groups the visitor may lend (an admin's power is never lent)."""
    return sorted(who.roles - {"admin"}), sorted(who.groups)


def request_of(data: Mapping[str, str], who: Principal, now: datetime) -> DelegationRequest:
    """The grant form as the request POST /v1/delegations takes: the roles and groups
    ticked, a blank start is `now`, a date without an offset is in the browser's zone."""
    where = zone(data.get("tz") or None)
    starts = instant("starts_at", data.get("starts_at", "").strip() or None, where)
    ends = instant("ends_at", data.get("ends_at", "").strip() or None, where)
    if ends is None:
        raise InvalidRequestError("say until when the delegation runs", field="ends_at")
    roles, groups = lendable(who)
    try:
        return DelegationRequest(
            delegate=data.get("delegate", "").strip(), starts_at=starts or now, ends_at=ends,
            reason=data.get("reason", "").strip() or None,
            roles=[r for r in roles if data.get(ROLE + r) == "on"],
            groups=[g for g in groups if data.get(GROUP + g) == "on"])
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
                             for e in exc.errors())
        raise InvalidRequestError(f"the delegation is not valid ({problems})") from None


def _page(request: Request, service: Interlock, who: Principal, status: int = 200,
          **context: Any) -> Response:
    roles, groups = lendable(who)
    book = book_of(DelegationDesk(service).load(who.tenant), who)
    return render(request, "delegations.html", status, who=who, book=book, roles=roles,
                  groups=groups, now=datetime.now(UTC), short=short_id,
                  **{"error": None, "values": {}, "notice": None, **context})


@router.get("", response_class=HTMLResponse)
def delegations(request: Request, service: ServiceDep, who: Visitor, granted: Said = None,
                revoked: Said = None) -> Response:
    """The visitor's delegations; `granted`/`revoked` name the one just changed."""
    notice = (f"Delegation {short_id(granted)} is granted." if granted
              else f"Delegation {short_id(revoked)} is revoked." if revoked else None)
    return _page(request, service, who, notice=notice)


@router.post("")
async def grant(request: Request, service: ServiceDep, who: Visitor) -> Response:
    data = await checked_form(request)
    try:
        made = await run_in_threadpool(DelegationDesk(service).grant, who.tenant,
                                       who.decider(), request_of(data, who, datetime.now(UTC)))
    except (InvalidRequestError, ForbiddenError) as exc:
        return await run_in_threadpool(_page, request, service, who, exc.status,
                                       error=_refusal(exc), values=data)
    return redirect(request, f"/delegations?granted={made.id}")


@router.post("/{delegation_id}/revoke")
async def revoke(request: Request, delegation_id: UUID, service: ServiceDep,
                 who: Visitor) -> Response:
    await checked_form(request)
    try:
        await run_in_threadpool(DelegationDesk(service).revoke, who.tenant, delegation_id,
                                who.decider())
    except (ForbiddenError, DelegationNotFoundError) as exc:
        return await run_in_threadpool(_page, request, service, who, exc.status,
                                       error=_refusal(exc))
    return redirect(request, f"/delegations?revoked={delegation_id}")


def _refusal(exc: Refusal) -> str:
    return f"Refused by the server: {exc.message}."
