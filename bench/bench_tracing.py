"""The cost of tracing per banking cycle, one client, in process: tracing off vs on.

On = OpenTelemetry SDK spans (invoke_agent, chat, execute_tool, with events) through a
BatchSpanProcessor (as in production) to an exporter that drops them, so the figure is
Interlock's and the SDK's in-process cost, not a collector's. Three modes run in one
process, in short blocks whose order rotates every round, so they share the machine's
noise: `off`, `before` (the spans opened through the SDK's `start_as_current_span` inside
a generator context manager, as Interlock did first), `on` (`OtelTracer` as shipped) and
`sampled` (`on` under `ParentBased(TraceIdRatioBased(0.1))`, what
`OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1` configures).
Prints the median ms per cycle of each, wall clock and the process's CPU time (all its
threads: the span processor's and the store's included), and the overheads against `off`.
On a shared machine the wall-clock difference is mostly other processes' noise; the CPU
a mode adds, over `off`'s wall time (`cpu/wall`), is what one client waits for it.

    python -m bench.bench_tracing --block 20 --rounds 30 --stores memory,sqlite,postgres
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Status, StatusCode

from bench.bench_cycle import cycle, store_url
from interlock.api.observability.tracing import OtelTracer
from interlock.bootstrap import build_service
from interlock.domain import Interlock
from interlock.domain.runtime.tracing import Attr, Operation, Span, Tracer
from interlock.examples.banking import AGENTS

MODES = ("off", "before", "on", "sampled")


class Dropping(SpanExporter):
    """Counts spans and keeps none."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def _clean(attributes: Mapping[str, Attr | None]) -> dict[str, Attr]:
    return {k: v for k, v in attributes.items() if v is not None}


class _BeforeSpan:
    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, attributes: Mapping[str, Attr | None]) -> None:
        self._span.set_attributes(_clean(attributes))

    def event(self, name: str, attributes: Mapping[str, Attr | None]) -> None:
        self._span.add_event(name, _clean(attributes))

    def fail(self, error_type: str, message: str) -> None:
        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, message[:500]))


class BeforeTracer:
    """The first implementation, kept as the baseline: the SDK's context managers."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    @contextmanager
    def span(self, operation: Operation, name: str,
             attributes: Mapping[str, Attr | None]) -> Iterator[Span]:
        kind = trace.SpanKind.CLIENT if operation == "chat" else trace.SpanKind.INTERNAL
        with self._tracer.start_as_current_span(name, kind=kind,
                                                attributes=_clean(attributes)) as span:
            yield _BeforeSpan(span)


async def _block(app: Interlock, n: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        await cycle(app)
    return ((time.perf_counter() - wall) / n * 1000, (time.process_time() - cpu) / n * 1000)


def bench(url: str, block: int, rounds: int) -> tuple[dict[str, tuple[float, float]], float]:
    """Median (wall, cpu) ms per cycle of each mode, and spans per traced cycle."""
    app = build_service(url, AGENTS)
    exporter, kept = Dropping(), Dropping()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    sdk = provider.get_tracer("bench")
    sampling = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.1)))
    sampling.add_span_processor(BatchSpanProcessor(kept))
    tracers: dict[str, Tracer | None] = {"off": None, "before": BeforeTracer(sdk),
                                         "on": OtelTracer(sdk),
                                         "sampled": OtelTracer(sampling.get_tracer("bench"))}
    asyncio.run(_block(app, max(20, block)))  # warm up: tables, prepared statements
    seen: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for r in range(rounds):
        for mode in MODES[r % len(MODES):] + MODES[:r % len(MODES)]:
            app.tracer = tracers[mode]
            seen[mode].append(asyncio.run(_block(app, block)))
    provider.shutdown()
    sampling.shutdown()
    app.close()
    medians = {mode: (statistics.median(w for w, _ in got), statistics.median(c for _, c in got))
               for mode, got in seen.items()}
    return medians, exporter.spans / (2 * rounds * block)  # `before` and `on` keep all


def report(kind: str, medians: dict[str, tuple[float, float]]) -> list[str]:
    """Rows of ms per cycle and what each mode adds: to wall, to CPU, CPU over wall."""
    wall_off, cpu_off = medians["off"]
    lines = []
    for clock, i, base, of in (("wall", 0, wall_off, wall_off), ("cpu", 1, cpu_off, cpu_off),
                               ("cpu/wall", 1, cpu_off, wall_off)):
        figures = " ".join(f"{medians[m][i]:8.3f}" for m in MODES[1:])
        added = " ".join(f"{(medians[m][i] - base) / of:10.1%}" for m in MODES[1:])
        lines.append(f"{kind:9} {clock:8} {medians['off'][i]:8.3f} {figures} {added}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block", type=int, default=20, help="cycles per timed block")
    parser.add_argument("--rounds", type=int, default=30, help="blocks of each mode")
    parser.add_argument("--stores", default="memory,sqlite,postgres")
    args = parser.parse_args()
    print(f"{'store':9} {'clock':8} {'off':>8} " + " ".join(f"{m:>8}" for m in MODES[1:])
          + " " + " ".join(f"{m + ' +':>10}" for m in MODES[1:]) + "  (ms per cycle)")
    for kind in args.stores.split(","):
        with store_url(kind) as url:
            medians, per = bench(url, args.block, args.rounds)
        for line in report(kind, medians):
            print(line)
        print(f"{kind:9} spans per traced cycle: {per:.1f}")


if __name__ == "__main__":
    main()
