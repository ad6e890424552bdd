"""Liveness (`/healthz`) and readiness (`/readyz`: store reachable, views running and close).

`/readyz` answers within a second, always: a store known to be down (its guard's last probe:
unreachable, silent, or read-only as a standby is) is a 503 at once, saying why
(`store_reason`), without a thread or a connection; otherwise the store and the views are
asked, and whatever does not answer within READY_WITHIN is a 503 too. A view stuck on an
event it cannot apply names the view, the event (notification id and topic) and the error's
class, never its text (it may quote a row's personal data). Read replicas, if any, are probed
and reported (`replicas`) but never make the server unready: a read none can answer goes to
the primary.
"""

from __future__ import annotations

import asyncio
from typing import Any

from eventsourcing.persistence import PersistenceError
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from interlock.api.deps import ReadModelsDep, ServiceDep
from interlock.api.jsonbody import JsonRoute
from interlock.api.observability.metrics import StoreProbe
from interlock.api.schemas import Health, ReplicaHealth
from interlock.domain import Interlock
from interlock.domain.errors import UnavailableError
from interlock.notify.notifier import Notifier
from interlock.projections.interface import ReadModels

# Views a few events behind a busy writer are still serving (lists wait for them);
# a server catching up a backlog, or whose views stopped, is not.
READY_LAG = 1000
READY_WITHIN = 0.5  # seconds the store and views may take to answer (slower: not ready)

router = APIRouter(tags=["health"], route_class=JsonRoute)


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Answers as soon as the server serves: never asks the store (liveness)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(request: Request, service: ServiceDep,
                 views: ReadModelsDep) -> Health | JSONResponse:
    """Ready: the store answers, the views run, none is stuck; else 503 and which is not.
    Notifications given up are counted, and do not make the server unready."""
    guard: StoreProbe | None = request.app.state.guard  # the wiring's (PostgreSQL only)
    reason = None
    if guard is not None and not guard.up:
        store, current, reason = False, False, guard.reason
    else:
        try:
            store, current = await asyncio.wait_for(
                run_in_threadpool(_probe, service, views), READY_WITHIN)
        except TimeoutError:
            store, current = False, False
            reason = f"no answer within {READY_WITHIN}s"
    stuck = views.stuck()
    health = Health(status="ready" if store and current and not stuck else "not_ready",
                    store=store, store_reason=reason, views=current, stuck=stuck or None,
                    notifications_failed=await _failed_notifications(request) if store else None,
                    **await _replicas(views))
    if health.status == "ready":
        return health
    return JSONResponse(health.model_dump(), status_code=503)


async def _failed_notifications(request: Request) -> int | None:
    notifier: Notifier | None = getattr(request.app.state, "notifier", None)
    if notifier is None:
        return None
    try:
        return await asyncio.wait_for(run_in_threadpool(notifier.store.stuck), READY_WITHIN)
    except (TimeoutError, PersistenceError, UnavailableError):
        return None


async def _replicas(views: ReadModels) -> dict[str, Any]:
    """The read replicas, each probed now (within READY_WITHIN): reported, never a reason
    to be not ready, since every read a replica cannot answer goes to the primary."""
    if views.replica_states() is None:
        return {}
    try:
        states = await asyncio.wait_for(run_in_threadpool(views.replica_states, True),
                                        READY_WITHIN)
    except TimeoutError:
        states = views.replica_states()  # as last seen: the probe goes on in its thread
    return {"replicas": [ReplicaHealth(**s) for s in states or []]}


def _probe(service: Interlock, views: ReadModels) -> tuple[bool, bool]:
    try:
        service.position()
    except (PersistenceError, UnavailableError):
        return False, False
    try:
        return True, not views.stopped() and views.lag() <= READY_LAG
    except (PersistenceError, UnavailableError):
        return True, False
