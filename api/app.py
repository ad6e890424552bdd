"""HTTP API v1: `make_app` over a given service (the wiring, `interlock.bootstrap`, builds one
from the settings)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Response
from starlette.concurrency import run_in_threadpool
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.types import ASGIApp

from interlock.api import errors
from interlock.api.agent_protocol import router as agent_protocol
from interlock.api.auth import AuthConfig
from interlock.api.dev_principals import EXAMPLE
from interlock.api.hot import HotRoutes
from interlock.api.limits import BodyLimit
from interlock.api.observability.metrics import CONTENT_TYPE as METRICS_TYPE
from interlock.api.observability.metrics import Metrics, StoreProbe
from interlock.api.observability.middleware import Observe, Observed
from interlock.api.observability.openapi import install_openapi, operation_id, package_version
from interlock.api.reference import install_reference
from interlock.api.routers import (
    agents,
    chats,
    decisions,
    delegations,
    health,
    interrupts,
    notifications,
    policies,
    reviews,
    slack,
    webhooks,
)
from interlock.api.streaming import KEEPALIVE, TurnStreams
from interlock.api.ui import console
from interlock.api.ui.session import SessionStore
from interlock.audit.signing import Signer
from interlock.domain import Interlock
from interlock.domain.errors import ConfigurationError
from interlock.projections.interface import ReadModels
from interlock.projections.views.webhooks import WebhooksView
from interlock.webhooks import Deliverer, DeliveryPolicy
from interlock.webhooks.addresses import AddressPolicy
from interlock.webhooks.subscriptions import Subscriptions

try:  # the otel extra: without it the API serves untraced
    from interlock.api.observability import tracing
except ImportError as missing:
    tracing, _NO_TRACING = None, missing.name  # type: ignore[assignment]

log = logging.getLogger("interlock.api")
MAX_BODY = 1 << 20
DEV_BANNER = (
    "!" * 72,
    "DEV MODE: no API keys configured. Every loopback caller is principal 'dev'",
    "with every role (requester, approver, auditor, admin) in tenant 'default'.",
    "Do not expose this server; configure keys with --keys, INTERLOCK_API_KEYS_FILE",
    "or INTERLOCK_API_KEYS.",
    "!" * 72,
)
DEV_ALONE = (  # after the banner when no other principal was named
    "'dev' asks for every call it sends, so it cannot decide a policy-held call",
    f"(four-eyes). To try approvals, restart with {EXAMPLE}",
    "and pick whom to act as in the console (docs/console.md).",
)

DESCRIPTION = """Chats with agents whose tools may pause for a human's decision.

Errors answer `{"error": {"code", "message", "details"}}`; see docs/http.md for the table.
`messages`, `resume` and `retry` stream Server-Sent Events with `Accept: text/event-stream`."""


def enable_tracing(app: FastAPI, tracer: Any) -> None:
    """Trace turns and requests with an OpenTelemetry tracer (None: the global one)."""
    if tracing is None:
        raise ConfigurationError("tracing needs OpenTelemetry: pip install 'interlock[otel]'"
                                 f" ({_NO_TRACING} is missing)")
    tracer = tracer or tracing.default_tracer()
    app.state.service.tracer = tracing.OtelTracer(tracer)
    app.state.observed.spans = tracing.RequestSpans(tracer)


class _App(FastAPI):
    """FastAPI with the chat cycle's hot routes (`interlock.api.hot`) served just inside its
    exception middleware: their errors meet the same handlers, and every middleware
    outside (request ids, access log, metrics, tracing, body limit) sees them as before."""

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        layer: Any = stack
        while not isinstance(layer, ExceptionMiddleware):
            layer = getattr(layer, "app", None)
            if layer is None:
                raise RuntimeError("FastAPI's middleware stack has no ExceptionMiddleware")
        layer.app = HotRoutes(layer.app)
        return stack


def make_app(
    service: Interlock,
    read_models: ReadModels,
    auth: AuthConfig | None = None,
    *,
    on_shutdown: Callable[[], None] | None = None,
    keepalive: float = KEEPALIVE,
    delivery: DeliveryPolicy | None = DeliveryPolicy(),  # noqa: B008 - frozen, shared safely
    tracer: Any = None,
    signer: Signer | None = None,
    cors_origins: Sequence[str] = (),
    guard: StoreProbe | None = None,
    sessions: SessionStore | None = None,
) -> FastAPI:
    """The API; without `auth` keys it runs in dev mode (loopback clients only).

    `keepalive`: seconds of silence after which a stream sends an SSE comment.
    `delivery`: how webhooks are delivered from this process (None: not from this one).
    `tracer`: an OpenTelemetry tracer; turns and requests are traced with it (off if None).
    `signer`: the checkpoint key that signs reviews' evidence packs (none: they are refused).
    `cors_origins`: origins browsers may call the API from (INTERLOCK_CORS_ORIGINS; none).
    `guard`: the store's probe, read by /readyz and /metrics (PostgreSQL's; none: asked).
    `sessions`: where console sign-ins are kept (the store's table; none: in this process).
    """
    auth = auth or AuthConfig(None)
    streams = TurnStreams(keepalive)
    hooks = read_models.find(WebhooksView)  # None: these read models keep no webhooks
    addresses = AddressPolicy((delivery or DeliveryPolicy()).allow)
    deliverer = Deliverer(hooks, delivery, addresses) if hooks is not None and delivery else None
    subscriptions = Subscriptions(service, hooks, addresses) if hooks is not None else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if auth.dev_mode:
            alone = () if auth.dev else DEV_ALONE
            for line in (*DEV_BANNER[:-1], *alone, DEV_BANNER[-1]):
                log.warning(line)
        if subscriptions is not None:
            await run_in_threadpool(subscriptions.migrate)  # the old table's, once
        if deliverer is not None:
            deliverer.start()
        yield
        await streams.drain()
        if deliverer is not None:
            deliverer.stop()
        if on_shutdown is not None:
            on_shutdown()

    # FastAPI's native telemetry off: Interlock's own middleware names, counts and traces
    # each request (api/observability); FastAPI's would record it a second time, and it
    # asks OpenTelemetry for its providers on every request even when none is set up.
    app = _App(title="Interlock", version=package_version(), description=DESCRIPTION,
               lifespan=lifespan, generate_unique_id_function=operation_id,
               docs_url=None, redoc_url=None,  # api/reference.py serves /docs without a CDN
               telemetry={"tracing": False, "metrics": False, "logs": False})
    app.state.service, app.state.read_models = service, read_models
    app.state.auth, app.state.streams, app.state.signer = auth, streams, signer
    app.state.webhooks, app.state.subscriptions = hooks, subscriptions
    app.state.guard = guard
    errors.install(app)
    routers = [m.router for m in (health, chats, interrupts, decisions, agents, webhooks,
                                  agent_protocol, reviews, notifications, slack,
                                  delegations, policies)]
    for router in routers:
        app.include_router(router)
    install_openapi(app, routers)
    install_reference(app)
    app.mount("/ui", console(service, read_models, auth, signer, sessions))
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY)
    metrics = Metrics(service, read_models, guard)
    app.state.metrics = metrics

    async def scrape() -> Response:
        body = await run_in_threadpool(metrics.render)
        return Response(body, media_type=METRICS_TYPE)

    app.add_api_route("/metrics", scrape, include_in_schema=False)
    if cors_origins:  # a browser client (agent-chat-ui) on another origin; keys, not cookies
        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins),
                           allow_methods=["*"], allow_headers=["*"],
                           expose_headers=["Content-Location", "X-Request-ID"])
    app.state.observed = observed = Observed(metrics)
    app.add_middleware(Observe, observed=observed)  # last: outermost, a 413 gets a request id
    if tracer is not None:
        enable_tracing(app, tracer)
    return app
