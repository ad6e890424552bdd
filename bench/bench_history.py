"""Agent Protocol history of a long thread: p95 and bytes, before and after the byte budget.

Builds one thread of `--turns` turns (each user message about `--text` bytes) and asks
`POST /agent-protocol/threads/{id}/history {"limit": 100}` `--runs` times over HTTP (the
app in process, Starlette's test client). "before" is main's route as it was (866c0f9),
served from the same app under another path: it replayed every turn's state of the thread,
then kept `limit` of them, each a whole copy. "after" is the route as it is: a page of at
most `limit` states and INTERLOCK_HISTORY_BYTES (4 MiB) of them, only those replayed.

    python -m bench.bench_history --turns 300 --store sqlite:///tmp/h.db
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from typing import Any
from uuid import UUID

from fastapi.testclient import TestClient

from interlock.api.agent_protocol import mapping
from interlock.api.app import make_app
from interlock.bootstrap import build_service
from interlock.domain import Interlock
from interlock.examples.banking import AGENTS
from interlock.projections import open_read_models


def main_history(service: Interlock, thread_id: UUID, limit: int) -> list[Any]:
    """The route as main had it: every turn's state replayed, then `limit` kept."""
    events = service.chat_events(thread_id)
    ends = [e.originator_version for e in events if type(e).__name__ == "TurnFinished"]
    latest = events[-1].originator_version if events else 1
    versions = sorted({*ends, latest}, reverse=True)
    parents = [*versions[1:], None]
    states = (mapping.state(service.get_chat(thread_id, version=v), parent)
              for v, parent in zip(versions, parents, strict=True))
    return list(states)[:limit]


async def _fill(service: Interlock, chat_id: UUID, turns: int, text: int) -> None:
    for i in range(turns):
        await service.send(chat_id, f"turn {i} " + "x" * text, actor="dev", tenant="default")


def _p95(samples: list[float]) -> float:
    return sorted(samples)[max(0, int(len(samples) * 0.95 + 0.5) - 1)]


def run(store: str, turns: int, text: int, runs: int, limit: int) -> dict[str, Any]:
    service = build_service(store, AGENTS)
    views = open_read_models(service)
    app = make_app(service, views)

    @app.post("/bench/before/{thread_id}")
    def before(thread_id: UUID) -> Any:
        return main_history(service, thread_id, limit)

    chat = service.start_chat("bankingAgent", actor="dev", tenant="default")
    asyncio.run(_fill(service, chat.id, turns, text))
    figures: dict[str, Any] = {"turns": turns, "events": service.get_chat(chat.id).version}
    with TestClient(app, client=("127.0.0.1", 50000)) as http:
        for name, path in (("before", f"/bench/before/{chat.id}"),
                           ("after", f"/agent-protocol/threads/{chat.id}/history")):
            samples, size, states = [], 0, 0
            for _ in range(runs):
                started = time.perf_counter()
                answer = http.post(path, json={"limit": limit})
                samples.append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text[:300]
                size, states = len(answer.content), len(json.loads(answer.content))
            figures[name] = {"p50_s": round(statistics.median(samples), 3),
                             "p95_s": round(_p95(samples), 3), "bytes": size, "states": states}
    views.close()
    service.close()
    return figures


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--text", type=int, default=1000, help="bytes of each user message")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--store", default=None, help="default: a temporary SQLite file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = args.store or f"sqlite:///{folder}/history.db"
        print(json.dumps(run(store, args.turns, args.text, args.runs, args.limit), indent=2))


if __name__ == "__main__":
    cli()
