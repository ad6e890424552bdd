"""Liveness (`/healthz`) and readiness (`/readyz`: store reachable, views running and close).

A view stuck on an event it cannot apply makes `/readyz` answer 503 naming the view,
the event (notification id and topic) and the error.
"""

from __future__ import annotations

from eventsourcing.persistence import PersistenceError
from fastapi import APIRouter
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from interlock.api.deps import ReadModelsDep, ServiceDep
from interlock.api.schemas import Health
from interlock.domain import Interlock
from interlock.projections.engine.interface import ReadModels

# Views a few events behind a busy writer are still serving (lists wait for them);
# a server catching up a backlog, or whose views stopped, is not.
READY_LAG = 1000

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Answers as soon as the server serves."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(service: ServiceDep, views: ReadModelsDep) -> Health | JSONResponse:
    store, current = await run_in_threadpool(_probe, service, views)
    stuck = views.stuck()
    health = Health(status="ready" if store and current else "not_ready", store=store,
                    views=current, stuck=stuck or None)
    if health.status == "ready":
        return health
    return JSONResponse(health.model_dump(), status_code=503)


def _probe(service: Interlock, views: ReadModels) -> tuple[bool, bool]:
    try:
        service.recorder.max_notification_id()
    except PersistenceError:
        return False, False
    try:
        return True, not views.stopped() and views.lag() <= READY_LAG
    except PersistenceError:
        return True, False
