"""Delegations of the caller's tenant: an approver away lets a colleague decide for them
(domain/delegations.py). A delegate votes under one by naming it in a resume's `delegation`."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict

from interlock.api.deps import PrincipalDep, ServiceDep
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.domain.delegations import Delegation, DelegationDesk, DelegationRequest

router = APIRouter(prefix="/v1/delegations", tags=["delegations"], route_class=JsonRoute)


class Delegations(BaseModel):
    model_config = ConfigDict(frozen=True)

    items: list[Delegation]


@router.post("", status_code=201, response_model=Delegation, responses=errors(404))
async def grant(body: DelegationRequest, service: ServiceDep, who: PrincipalDep) -> Delegation:
    """Let `delegate` decide for you from `starts_at` until `ends_at`, with your roles and
    groups or a subset of them (never admin). Recorded; revocable."""
    return await run_in_threadpool(DelegationDesk(service).grant, who.tenant, who.decider(),
                                   body)


@router.delete("/{delegation_id}", response_model=Delegation, responses=errors(404))
async def revoke(delegation_id: UUID, service: ServiceDep, who: PrincipalDep) -> Delegation:
    """End a delegation now (its delegator or an admin); revoking it again changes nothing."""
    return await run_in_threadpool(DelegationDesk(service).revoke, who.tenant, delegation_id,
                                   who.decider())


@router.get("", response_model=Delegations, responses=errors())
async def listed(service: ServiceDep, who: PrincipalDep) -> Delegations:
    """The tenant's delegations naming you (all of them, for an admin or an auditor)."""
    book = await run_in_threadpool(DelegationDesk(service).load, who.tenant)
    return Delegations(items=book.visible_to(who.decider(), "auditor" in who.roles))
