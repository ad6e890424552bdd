"""Request-scoped dependencies as `Annotated` aliases: the service, the views, the caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from interlock.api.auth import AuthConfig, Principal, Role
from interlock.api.errors import ViewsBehindError
from interlock.api.observability.context import note_principal
from interlock.api.streaming import TurnStreams
from interlock.domain import Interlock
from interlock.projections.engine.interface import ReadModels

_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer <key>`")


async def get_service(request: Request) -> Interlock:
    service: Interlock = request.app.state.service
    return service


async def get_read_models(request: Request) -> ReadModels:
    views: ReadModels = request.app.state.read_models
    return views


async def get_streams(request: Request) -> TurnStreams:
    streams: TurnStreams = request.app.state.streams
    return streams


async def get_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    auth: AuthConfig = request.app.state.auth
    header = f"Bearer {credentials.credentials}" if credentials else None
    principal = auth.authenticate(header, request.client.host if request.client else None)
    note_principal(principal.id, principal.tenant)  # for log lines and the access log
    return principal


ServiceDep = Annotated[Interlock, Depends(get_service)]
ReadModelsDep = Annotated[ReadModels, Depends(get_read_models)]
StreamsDep = Annotated[TurnStreams, Depends(get_streams)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]


def _needs(role: Role) -> Callable[[Principal], Awaitable[Principal]]:
    async def check(principal: PrincipalDep) -> Principal:
        principal.require(role)
        return principal

    return check


Reader = PrincipalDep  # any role of the tenant may read its chats, inbox and decisions
Requester = Annotated[Principal, Depends(_needs("requester"))]
Approver = Annotated[Principal, Depends(_needs("approver"))]


def current_views(service: ServiceDep, views: ReadModelsDep) -> ReadModels:
    """The views once they show every event committed before this request (read-your-writes).

    Waiting here, on the read, costs a write nothing: writers never wait for the views.
    """
    try:
        views.wait(service.recorder.max_notification_id())
    except TimeoutError:
        raise ViewsBehindError() from None
    return views


CurrentViews = Annotated[ReadModels, Depends(current_views)]
