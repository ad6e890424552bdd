"""Request-scoped dependencies as `Annotated` aliases: the service, the views, the caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterator
from typing import Annotated, Any, Literal

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from interlock.api.auth import AuthConfig, Principal, Role
from interlock.api.errors import ViewsBehindError
from interlock.api.observability.context import note_principal
from interlock.api.streaming import TurnStreams
from interlock.domain import Interlock
from interlock.projections.engine.interface import V
from interlock.projections.interface import (
    ChatFilter,
    ChatSummary,
    DecisionFilter,
    DecisionRow,
    DecisionStats,
    InboxFilter,
    InboxRow,
    Page,
    Queries,
    ReadModels,
    StuckView,
)

_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer <key>`")


def service_of(request: Request) -> Interlock:
    """The service, read in the route: the chat cycle's three routes skip FastAPI's
    dependency resolution for what needs none (each dependency costs it a resolution per
    request; `bench_instructions`)."""
    service: Interlock = request.app.state.service
    return service


def streams_of(request: Request) -> TurnStreams:
    streams: TurnStreams = request.app.state.streams
    return streams


async def get_service(request: Request) -> Interlock:
    return service_of(request)


async def get_read_models(request: Request) -> ReadModels:
    views: ReadModels = request.app.state.read_models
    return views


async def get_streams(request: Request) -> TurnStreams:
    return streams_of(request)


def _authenticate(
    request: Request, credentials: HTTPAuthorizationCredentials | None
) -> Principal:
    auth: AuthConfig = request.app.state.auth
    header = f"Bearer {credentials.credentials}" if credentials else None
    principal = auth.authenticate(header, request.client.host if request.client else None)
    note_principal(principal.id, principal.tenant)  # for log lines and the access log
    return principal


async def get_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    return _authenticate(request, credentials)


ServiceDep = Annotated[Interlock, Depends(get_service)]
ReadModelsDep = Annotated[ReadModels, Depends(get_read_models)]
StreamsDep = Annotated[TurnStreams, Depends(get_streams)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]


def _needs(role: Role) -> Callable[..., Awaitable[Principal]]:
    # One dependency, not one on top of `get_principal`: each level of dependencies costs
    # FastAPI a resolution on every request, and these guard the busiest routes.
    async def check(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        principal = _authenticate(request, credentials)
        principal.require(role)
        return principal

    return check


Reader = PrincipalDep  # any role of the tenant may read its chats, inbox and decisions
Requester = Annotated[Principal, Depends(_needs("requester"))]
Approver = Annotated[Principal, Depends(_needs("approver"))]


def current_views(service: ServiceDep, views: ReadModelsDep) -> ReadModels:
    """The views, each showing every event committed before this request once a query
    reads it (read-your-writes).

    Waiting on the read costs a write nothing: writers never wait for the views. Each query
    waits for the view it reads alone, so a view stuck or behind fails only its own lists.
    With read replicas (INTERLOCK_READ_REPLICAS) the query then reads on one whose copy of
    the view has applied the position too, or here (docs/ha.md, "Read replicas").
    """
    return _ReadingAt(views, service.position())


class _ReadingAt:
    """`views` whose queries first wait until their own view has applied `position`."""

    def __init__(self, views: ReadModels, position: int | None) -> None:
        self._views, self._position = views, position

    def _current(self, view: str) -> Queries:
        try:
            self._views.wait(self._position, views=(view,))
        except TimeoutError:
            raise ViewsBehindError() from None
        return self._views.at(view, self._position)

    def chats(self, f: ChatFilter, limit: int = 50, cursor: str | None = None
              ) -> Page[ChatSummary]:
        return self._current("chats").chats(f, limit, cursor)

    def inbox(self, f: InboxFilter, limit: int = 50, cursor: str | None = None
              ) -> Page[InboxRow]:
        return self._current("inbox").inbox(f, limit, cursor)

    def inbox_count(self, f: InboxFilter, cap: int) -> int:
        return self._current("inbox").inbox_count(f, cap)

    def inbox_pending(self) -> dict[tuple[str, str], int]:
        return self._current("inbox").inbox_pending()

    def decisions(self, f: DecisionFilter, limit: int = 50, cursor: str | None = None
                  ) -> Page[DecisionRow]:
        return self._current("decisions").decisions(f, limit, cursor)

    def decision_stats(self, f: DecisionFilter) -> DecisionStats:
        return self._current("decisions").decision_stats(f)

    def export_decisions(self, f: DecisionFilter, fmt: Literal["csv", "jsonl"]
                         ) -> Iterator[str]:
        return self._current("decisions").export_decisions(f, fmt)

    def at(self, name: str, position: int | None) -> Queries:
        return self._views.at(name, position)

    def replica_states(self, probe: bool = False) -> list[dict[str, Any]] | None:
        return self._views.replica_states(probe)

    def view(self, kind: type[V]) -> V:
        """The view itself: its reads wait for nothing (`wait` first)."""
        return self._views.view(kind)

    def find(self, kind: type[V]) -> V | None:
        return self._views.find(kind)

    def wait(self, position: int | None, timeout: float = 5.0,
             views: Collection[str] | None = None) -> None:
        self._views.wait(position, timeout, views)

    def is_current(self) -> bool:
        return self._views.is_current()

    def lag(self) -> int:
        return self._views.lag()

    def stopped(self) -> bool:
        return self._views.stopped()

    def passes(self) -> int:
        return self._views.passes()

    def stuck(self) -> list[StuckView]:
        return self._views.stuck()

    def close(self) -> None:
        self._views.close()


CurrentViews = Annotated[ReadModels, Depends(current_views)]
