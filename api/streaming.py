"""Server-Sent Events for a turn: the turn runs as a task that outlives its connection.

Every frame has an id `<stream>.<n>`; the frames of a stream are kept while it runs and for
`RETAIN` seconds after, so a client cut off (a proxy's idle limit, a network blip) sends
`Last-Event-ID` and gets exactly the frames after that one, then the rest live. A comment
(`: keep-alive`) goes out every `keepalive` seconds in which nothing else did.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from fastapi.responses import StreamingResponse

from interlock.api.errors import describe
from interlock.domain import Chat, StreamEvent, TurnResult
from interlock.domain.errors import InvalidRequestError
from interlock.domain.runtime.turns import Emit

log = logging.getLogger("interlock.api")
Turn = Callable[[Emit | None], Coroutine[Any, Any, TurnResult]]
Owner = tuple[str, str]  # (chat id, tenant): only they may pick a stream up again
KEEPALIVE = 15.0  # under the 60 s idle limit of common load balancers
RETAIN = 300.0
MAX_KEPT = 1000
POLL = 0.5
KEEPALIVE_FRAME = b": keep-alive\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_ID = re.compile(r"([0-9a-f]{32})\.(\d{1,9})")


def sse(kind: str, data: dict[str, Any], event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class _Stream:
    """One turn's frames, appended as they come; any number of readers follow them."""

    def __init__(self, owner: Owner) -> None:
        self.token, self.owner = uuid.uuid4().hex, owner
        self.events: list[StreamEvent] = []
        self.done_at: float | None = None
        self._wake = asyncio.Event()

    def push(self, event: StreamEvent) -> None:
        self.events.append(event)
        self._wake.set()

    def close(self) -> None:
        self.done_at = time.monotonic()
        self._wake.set()

    async def follow(self, start: int, keepalive: float) -> AsyncIterator[bytes]:
        """The frames from index `start` on, live until the stream closes."""
        i = start
        while True:
            while i < len(self.events):
                event = self.events[i]
                yield sse(event.type, event.data, f"{self.token}.{i}")
                i += 1
            if self.done_at is not None:
                return
            self._wake.clear()
            if i < len(self.events):
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), keepalive)
            except TimeoutError:
                yield KEEPALIVE_FRAME


class TurnStreams:
    """Keeps running turns referenced, so a client that disconnects loses nothing."""

    def __init__(self, keepalive: float = KEEPALIVE) -> None:
        self.keepalive = keepalive
        self._running: set[asyncio.Task[TurnResult]] = set()
        self._kept: dict[str, _Stream] = {}

    async def open(self, turn: Turn, owner: Owner) -> StreamingResponse:
        """Start the turn; a refusal before its first event is raised as a typed error."""
        self._prune()
        stream = _Stream(owner)
        arrived = asyncio.Event()

        async def emit(event: StreamEvent) -> None:
            stream.push(event)
            arrived.set()

        task = asyncio.create_task(turn(emit))
        self._running.add(task)
        task.add_done_callback(lambda t: self._finished(t, stream, arrived))
        await arrived.wait()
        if not stream.events and stream.done_at is not None:
            result = task.result()  # refused: raised here, before any frame is sent
            for event in result.closing_events():  # answered without running (a replay)
                stream.push(event)
        self._kept[stream.token] = stream
        return _respond(stream.follow(0, self.keepalive))

    def rejoin(self, last_event_id: str, owner: Owner) -> StreamingResponse | None:
        """The frames after `last_event_id`, then the rest live; None when not held here."""
        match = _ID.fullmatch(last_event_id.strip())
        if match is None:
            raise InvalidRequestError("Last-Event-ID is not an id this server sent",
                                      last_event_id=last_event_id[:200])
        stream = self._kept.get(match.group(1))
        if stream is None or stream.owner != owner:
            return None
        return _respond(stream.follow(int(match.group(2)) + 1, self.keepalive))

    async def from_log(self, load: Callable[[], Chat]) -> StreamingResponse:
        """For a stream this process does not hold: wait for the chat's turn to end (it may
        run in another worker), then send its end as the committed log has it."""
        chat = await asyncio.to_thread(load)  # no such chat: a typed error, before any frame
        return _respond(self._ending(chat, load))

    async def _ending(self, chat: Chat, load: Callable[[], Chat]) -> AsyncIterator[bytes]:
        waited = 0.0
        while chat.state.status == "running":
            await asyncio.sleep(POLL)
            waited += POLL
            if waited >= self.keepalive:
                waited = 0.0
                yield KEEPALIVE_FRAME
            chat = await asyncio.to_thread(load)
        stream = _Stream((str(chat.id), chat.state.tenant))
        for event in TurnResult.of(chat, 0, None).closing_events():
            stream.push(event)
        stream.close()
        async for frame in stream.follow(0, self.keepalive):
            yield frame

    def _finished(self, task: asyncio.Task[TurnResult], stream: _Stream,
                  arrived: asyncio.Event) -> None:
        self._running.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.info("streamed turn ended with %r", exc)
            if stream.events:  # after the first frame, a failure is the stream's last event
                stream.push(StreamEvent(type="error", data=describe(exc)))
        stream.close()
        arrived.set()

    def _prune(self) -> None:
        """Forget streams that ended more than RETAIN seconds ago, and the oldest beyond
        MAX_KEPT (a running stream is never forgotten: its turn holds it)."""
        now = time.monotonic()
        for token, stream in list(self._kept.items()):
            ended = stream.done_at is not None
            if ended and (now - (stream.done_at or now) > RETAIN or len(self._kept) > MAX_KEPT):
                del self._kept[token]

    async def drain(self) -> None:
        """Let running turns finish (server shutdown)."""
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)


def _respond(frames: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(frames, media_type="text/event-stream", headers=HEADERS)
