"""The outermost middleware: a request id for every request, the access log, HTTP metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from interlock.api.observability.context import begin, request_id_from
from interlock.api.observability.logs import log_access
from interlock.api.observability.metrics import Metrics

if TYPE_CHECKING:  # OpenTelemetry is optional: imported only when tracing is on
    from interlock.api.observability.tracing import RequestSpans

HEADER = "X-Request-ID"


@dataclass
class Observed:
    """What the middleware feeds; tracing may be switched on after the app is built."""

    metrics: Metrics | None = None
    spans: RequestSpans | None = None


class Observe:
    """Pure ASGI: sets the request context, answers `X-Request-ID`, logs one access line."""

    def __init__(self, app: ASGIApp, observed: Observed) -> None:
        self.app, self.observed = app, observed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        spans = self.observed.spans
        if spans is None:
            await self._observe(scope, receive, send, None)
            return
        with spans.request(scope) as span:
            await self._observe(scope, receive, send, span)

    async def _observe(self, scope: Scope, receive: Receive, send: Send, span: Any) -> None:
        raw = dict(scope["headers"]).get(HEADER.lower().encode())
        info = begin(request_id_from(raw.decode("latin-1") if raw else None), scope)
        started, status = time.perf_counter(), 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)[HEADER] = info.request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = info.route or "unmatched"
            if span is not None:
                span.update_name(f"{scope['method']} {route}")
                span.set_attributes({"http.route": route, "http.response.status_code": status})
            if self.observed.metrics is not None:
                self.observed.metrics.count_http(scope["method"], route, status)
            log_access(scope["method"], scope["path"], status, seconds, {
                "method": scope["method"], "path": scope["path"], "route": route,
                "status": status, "duration_ms": round(seconds * 1000, 2)})
