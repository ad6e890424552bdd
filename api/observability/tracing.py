"""OpenTelemetry behind the turn loop's `Tracer` protocol, and the HTTP request's span.

Imported only when tracing is configured: OpenTelemetry is the optional `otel` extra.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import context, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import Scope

from interlock.domain.tracing import Attr, Operation, Span

_KINDS = {"chat": SpanKind.CLIENT, "invoke_agent": SpanKind.INTERNAL,
          "execute_tool": SpanKind.INTERNAL}


def _clean(attributes: Mapping[str, Attr | None]) -> dict[str, Attr]:
    return {k: v for k, v in attributes.items() if v is not None}


class _OtelSpan:
    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, attributes: Mapping[str, Attr | None]) -> None:
        self._span.set_attributes(_clean(attributes))

    def event(self, name: str, attributes: Mapping[str, Attr | None]) -> None:
        self._span.add_event(name, _clean(attributes))

    def fail(self, error_type: str, message: str) -> None:
        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, message[:500]))


class OtelTracer:
    """The loop's tracer over an OpenTelemetry tracer (spans become the current span)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    @contextmanager
    def span(self, operation: Operation, name: str,
             attributes: Mapping[str, Attr | None]) -> Iterator[Span]:
        with self._tracer.start_as_current_span(name, kind=_KINDS[operation],
                                                attributes=_clean(attributes)) as span:
            yield _OtelSpan(span)


class RequestSpans:
    """A SERVER span per HTTP request, child of the caller's `traceparent` when it sent one."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    @contextmanager
    def request(self, scope: Scope) -> Iterator[trace.Span]:
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        token = context.attach(propagate.extract(carrier))
        try:
            with self._tracer.start_as_current_span(
                scope["method"], kind=SpanKind.SERVER,
                attributes={"http.request.method": scope["method"], "url.path": scope["path"]},
            ) as span:
                yield span
        finally:
            context.detach(token)


def default_tracer() -> trace.Tracer:
    """Interlock's tracer from the global provider; an SDK one is installed if none is."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        _install_sdk_provider()
    from interlock.api.observability.openapi import package_version

    return trace.get_tracer("interlock", package_version())


def _install_sdk_provider() -> None:
    """OTLP (when its exporter is installed, configured by OTEL_EXPORTER_OTLP_*), else stderr."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    exporter: SpanExporter
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found]
            OTLPSpanExporter,
        )
    except ImportError:
        exporter = ConsoleSpanExporter()
    else:
        exporter = OTLPSpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "interlock"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
