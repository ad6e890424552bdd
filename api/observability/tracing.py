"""OpenTelemetry behind the turn loop's `Tracer` protocol, and the HTTP request's span.

Imported only when tracing is configured: OpenTelemetry is the optional `otel` extra.
A turn's spans are on its hot path, so `OtelTracer` opens them with one small object each
(start, attach, detach, end) instead of the SDK's nested generator context managers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType

from opentelemetry import context, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import Scope

from interlock.api.observability.openapi import package_version
from interlock.domain.runtime.tracing import Attr, Operation

_KINDS = {"chat": SpanKind.CLIENT, "invoke_agent": SpanKind.INTERNAL,
          "execute_tool": SpanKind.INTERNAL}


def _clean(attributes: Mapping[str, Attr | None]) -> dict[str, Attr]:
    return {k: v for k, v in attributes.items() if v is not None}


class _CurrentSpan:
    """An OpenTelemetry span, current while its `with` block runs, and the loop's `Span`."""

    __slots__ = ("_attributes", "_failed", "_kind", "_name", "_span", "_token", "_tracer")

    def __init__(self, tracer: trace.Tracer, kind: SpanKind, name: str,
                 attributes: Mapping[str, Attr | None]) -> None:
        self._tracer, self._kind, self._name = tracer, kind, name
        self._attributes, self._failed = attributes, False

    def __enter__(self) -> _CurrentSpan:
        self._span = span = self._tracer.start_span(self._name, kind=self._kind,
                                                    attributes=_clean(self._attributes))
        self._token = context.attach(trace.set_span_in_context(span))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        context.detach(self._token)
        # As the SDK's own `use_span`: an Exception escaping the block is recorded and is
        # the span's error, unless the loop already said how it failed.
        if isinstance(error, Exception):
            self._span.record_exception(error)
            if not self._failed:
                self._span.set_status(Status(StatusCode.ERROR, f"{kind.__name__}: {error}"
                                             if kind else str(error)))
        self._span.end()

    def set(self, attributes: Mapping[str, Attr | None]) -> None:
        self._span.set_attributes(_clean(attributes))

    def event(self, name: str, attributes: Mapping[str, Attr | None]) -> None:
        self._span.add_event(name, _clean(attributes))

    def fail(self, error_type: str, message: str) -> None:
        self._failed = True
        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, message[:500]))


class OtelTracer:
    """The loop's tracer over an OpenTelemetry tracer (spans become the current span)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def span(self, operation: Operation, name: str,
             attributes: Mapping[str, Attr | None]) -> _CurrentSpan:
        return _CurrentSpan(self._tracer, _KINDS[operation], name, attributes)


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
