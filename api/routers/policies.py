"""Data policies of the caller's tenant (domain/policy_book.py): a risk team proposes a
version of a tool's approval policy, another person approves it, and it is in force from its
effective time; `what-if` runs a version against the tool's recorded calls first."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from interlock.api.auth import AuthConfig
from interlock.api.deps import CurrentViews, PrincipalDep, ServiceDep
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.domain import Interlock
from interlock.domain.chat.policies import normalise_id
from interlock.domain.policy_book import (
    NAME,
    Decision,
    PolicyDesk,
    PolicyProposal,
    PolicyVersion,
)
from interlock.domain.policy_whatif import RolesOf, WhatIf, what_if
from interlock.projections.interface import ChatFilter, ReadModels

router = APIRouter(prefix="/v1/policies", tags=["policies"], route_class=JsonRoute)
PolicyId = Annotated[str, Path(pattern=NAME)]
Version = Annotated[int, Path(ge=1, le=1_000_000)]


class PolicyVersions(BaseModel):
    model_config = ConfigDict(frozen=True)

    items: list[PolicyVersion]


class Withdrawal(BaseModel):
    """Why the version is taken back (it is kept, marked withdrawn)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(min_length=1, max_length=2000)


def _desk(service: Interlock) -> PolicyDesk:
    return PolicyDesk(service, {name: [t.name for t in agent.tools]
                                for name, agent in service.agents.items()})


@router.post("", status_code=201, response_model=PolicyVersion, responses=errors(404))
async def propose_policy(body: PolicyProposal, service: ServiceDep, who: PrincipalDep
                  ) -> PolicyVersion:
    """Propose the next version of policy `id` for `agent`'s `tool` (needs the role
    policy_admin, or admin); it is in force once another person approves it, from
    `effective_from` (omitted: from that approval)."""
    return await run_in_threadpool(_desk(service).propose, who.tenant, who.decider(), body)


@router.get("", response_model=PolicyVersions, responses=errors())
async def list_policies(service: ServiceDep, who: PrincipalDep) -> PolicyVersions:
    """Every version of the tenant's data policies, each with its state."""
    book = await run_in_threadpool(_desk(service).load, who.tenant)
    return PolicyVersions(items=book.all_versions())


@router.get("/{policy_id}", response_model=PolicyVersions, responses=errors(404))
async def policy_versions(policy_id: PolicyId, service: ServiceDep, who: PrincipalDep
                   ) -> PolicyVersions:
    """The versions of one policy, the first first."""
    book = await run_in_threadpool(_desk(service).load, who.tenant)
    book.get(policy_id)
    return PolicyVersions(items=book.versions[policy_id])


@router.get("/{policy_id}/versions/{version}", response_model=PolicyVersion,
            responses=errors(404))
async def policy_version(policy_id: PolicyId, version: Version, service: ServiceDep,
                         who: PrincipalDep) -> PolicyVersion:
    """One version: its document, who proposed and approved it, when it is in force."""
    book = await run_in_threadpool(_desk(service).load, who.tenant)
    return book.get(policy_id, version)


@router.post("/{policy_id}/versions/{version}/approve", response_model=PolicyVersion,
             responses=errors(404, 409))
async def approve_policy(policy_id: PolicyId, version: Version, body: Decision, service: ServiceDep,
                  who: PrincipalDep) -> PolicyVersion:
    """Approve a proposed version: a policy_admin (or admin) other than its proposer
    (403 `four_eyes`)."""
    return await run_in_threadpool(_desk(service).approve, who.tenant, policy_id, version,
                                   who.decider(), body.reason)


@router.post("/{policy_id}/versions/{version}/withdraw", response_model=PolicyVersion,
             responses=errors(404, 409))
async def withdraw_policy(policy_id: PolicyId, version: Version, body: Withdrawal,
                   service: ServiceDep, who: PrincipalDep) -> PolicyVersion:
    """Take a version back (its proposer, or a policy_admin): proposed, it never comes into
    force; in force, it ends now. Calls held under it keep it."""
    return await run_in_threadpool(_desk(service).withdraw, who.tenant, policy_id, version,
                                   who.decider(), body.reason)


@router.post("/{policy_id}/versions/{version}/what-if", response_model=WhatIf,
             responses=errors(404))
async def policy_what_if(
    policy_id: PolicyId, version: Version, request: Request, service: ServiceDep,
    views: CurrentViews, who: PrincipalDep,
    chats: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> WhatIf:
    """Run a version (proposed or not) against the tool's calls recorded in the tenant's
    last `chats` chats of its agent: would each be held, through which stages, and would
    its recorded votes pass (voters' roles as their keys hold them now)."""
    auth: AuthConfig = request.app.state.auth
    return await run_in_threadpool(_what_if, service, views, who.tenant, policy_id, version,
                                   chats, roles_by_id(auth, who.tenant))


def roles_by_id(auth: AuthConfig, tenant: str) -> RolesOf | None:
    """Each principal of the tenant's roles today, by normalised id (dev mode: unknown)."""
    if auth.keys is None:
        return None
    known = {normalise_id(p.id): p.decider() for p in auth.keys.values() if p.tenant == tenant}
    return known.get


def _what_if(service: Interlock, views: ReadModels, tenant: str, policy_id: str,
             version: int, limit: int, roles_of: RolesOf | None) -> WhatIf:
    return what_if(service, tenant, policy_id, version,
                   lambda agent: recent_chats(views, tenant, agent, limit), roles_of)


def recent_chats(views: ReadModels, tenant: str, agent: str, limit: int) -> list[UUID]:
    """The ids of the tenant's last `limit` chats of `agent` (the chats view's order)."""
    ids: list[UUID] = []
    cursor = None
    while len(ids) < limit:
        page = views.chats(ChatFilter(tenant=tenant, agent=agent), min(100, limit - len(ids)),
                           cursor)
        ids += [UUID(c.chat_id) for c in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    return ids
