"""The cost of tracing per banking cycle, one client, in process: tracing off vs on.

On = OpenTelemetry SDK spans (invoke_agent, chat, execute_tool, with events) through a
BatchSpanProcessor to an exporter that drops them, so the figure is Interlock's and the
SDK's in-process cost, not a collector's. Rounds alternate off/on to share the noise;
prints the median ms per cycle of each and the overhead.

    python -m bench.bench_tracing --cycles 300 --rounds 6 --stores sqlite,postgres
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from bench.bench_cycle import cycle, store_url
from interlock.api.observability.tracing import OtelTracer
from interlock.bootstrap import build_service
from interlock.domain import Interlock
from interlock.examples.banking import AGENTS


class Dropping(SpanExporter):
    """Counts spans and keeps none."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


async def _cycles(app: Interlock, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        await cycle(app)
    return (time.perf_counter() - started) / n * 1000


def bench(url: str, cycles: int, rounds: int) -> tuple[float, float, int]:
    app = build_service(url, AGENTS)
    exporter = Dropping()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = OtelTracer(provider.get_tracer("bench"))
    asyncio.run(_cycles(app, max(20, cycles // 5)))  # warm up
    off, on = [], []
    for _ in range(rounds):
        app.tracer = None
        off.append(asyncio.run(_cycles(app, cycles)))
        app.tracer = tracer
        on.append(asyncio.run(_cycles(app, cycles)))
    provider.shutdown()
    app.close()
    return statistics.median(off), statistics.median(on), exporter.spans // (rounds * cycles)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--stores", default="memory,sqlite,postgres")
    args = parser.parse_args()
    print(f"{'store':10} {'off ms/cycle':>13} {'on ms/cycle':>12} {'overhead':>9} "
          f"{'spans/cycle':>12}")
    for kind in args.stores.split(","):
        with store_url(kind) as url:
            off, on, per = bench(url, args.cycles, args.rounds)
        print(f"{kind:10} {off:13.3f} {on:12.3f} {(on - off) / off:9.1%} {per:12d}")


if __name__ == "__main__":
    main()
