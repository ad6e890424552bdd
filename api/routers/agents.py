"""The agents this server runs, their tools, and which of them may interrupt."""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter

from interlock.api.deps import Reader, ServiceDep
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.api.schemas import AgentList, AgentPublic
from interlock.domain import Interlock

router = APIRouter(prefix="/v1/agents", tags=["agents"], route_class=JsonRoute)


@router.get("", response_model=AgentList, responses=errors())
async def list_agents(service: ServiceDep, _: Reader) -> AgentList:
    """The agents, their tools' schemas, and which tools may interrupt."""
    return _listing(service)


@cache
def _listing(service: Interlock) -> AgentList:
    """Agents are fixed for a service's life; their JSON schemas are built once."""
    return AgentList(items=[AgentPublic.of(a) for a in service.agents.values()])
