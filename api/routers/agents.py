"""The agents this server runs, their tools, and which of them may interrupt."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import Reader, ServiceDep
from api.routers.common import errors
from api.schemas import AgentList, AgentPublic

router = APIRouter(prefix="/v1/agents", tags=["agents"])


@router.get("", response_model=AgentList, responses=errors())
async def list_agents(service: ServiceDep, _: Reader) -> AgentList:
    return AgentList(items=[AgentPublic.of(a) for a in service.agents.values()])
