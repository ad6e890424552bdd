"""Server-Sent Events for a turn: the turn runs as a task that outlives its connection."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from fastapi.responses import StreamingResponse

from interlock.api.errors import describe
from interlock.domain import StreamEvent, TurnResult
from interlock.domain.turns import Emit

log = logging.getLogger("interlock.api")
Turn = Callable[[Emit | None], Coroutine[Any, Any, TurnResult]]
_Queue = asyncio.Queue[StreamEvent | None]


def sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class TurnStreams:
    """Keeps running turns referenced, so a client that disconnects loses nothing."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[TurnResult]] = set()

    async def open(self, turn: Turn) -> StreamingResponse:
        """Start the turn; a refusal before its first event is raised as a typed error."""
        queue: _Queue = asyncio.Queue()

        async def emit(event: StreamEvent) -> None:
            queue.put_nowait(event)

        task = asyncio.create_task(turn(emit))
        self._running.add(task)
        task.add_done_callback(self._finished)
        task.add_done_callback(lambda _: queue.put_nowait(None))
        first = await queue.get()
        if first is None:  # refused (raised here), or answered without running (a replay)
            for event in task.result().closing_events():
                queue.put_nowait(event)
            queue.put_nowait(None)
            first = await queue.get()
        return StreamingResponse(
            _frames(first, queue, task),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    def _finished(self, task: asyncio.Task[TurnResult]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.info("streamed turn ended with %r", task.exception())

    async def drain(self) -> None:
        """Let running turns finish (server shutdown)."""
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)


async def _frames(
    first: StreamEvent | None, queue: _Queue, task: asyncio.Task[TurnResult]
) -> AsyncIterator[bytes]:
    event = first
    while event is not None:
        yield sse(event.type, event.data)
        event = await queue.get()
    if not task.cancelled() and (exc := task.exception()) is not None:
        yield sse("error", describe(exc))
