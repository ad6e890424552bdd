"""The outermost middleware: a request id for every request, the access log, HTTP metrics."""

from __future__ import annotations

import logging
import time

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from interlock.api.observability.context import begin, request_id_from
from interlock.api.observability.metrics import Metrics

access = logging.getLogger("interlock.access")
HEADER = "X-Request-ID"


class Observe:
    """Pure ASGI: sets the request context, answers `X-Request-ID`, logs one access line."""

    def __init__(self, app: ASGIApp, metrics: Metrics | None = None) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
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
            if self.metrics is not None:
                self.metrics.http.labels(scope["method"], route, str(status)).inc()
            access.info("%s %s %d %.1fms", scope["method"], scope["path"], status,
                        seconds * 1000, extra={"fields": {
                            "method": scope["method"], "path": scope["path"], "route": route,
                            "status": status, "duration_ms": round(seconds * 1000, 2)}})
