"""What several routers share: documented error answers, turn answers (JSON or SSE)."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

from fastapi import Request
from fastapi.responses import StreamingResponse

from interlock.api.schemas import ErrorBody, TurnPublic
from interlock.api.streaming import Turn, TurnStreams
from interlock.domain import Interlock
from interlock.domain.chat.aggregate import Chat
from interlock.domain.errors import ModelError

Responses = dict[int | str, dict[str, Any]]


def errors(*statuses: int) -> Responses:
    """OpenAPI entries for the error answers a route may give."""
    return {s: {"model": ErrorBody} for s in (401, 403, 422, *statuses)}


STREAMED: Responses = {200: {"content": {"text/event-stream": {
    "schema": {"type": "string"},
    "example": 'event: interrupt\ndata: {"ref":"userApproval-1","name":"userApproval"}\n\n',
}}, "description": "The turn result; or with `Accept: text/event-stream`, its events."}}


def wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


async def answer_turn(
    request: Request, turn: Turn, streams: TurnStreams, tenant: str
) -> TurnPublic | StreamingResponse:
    """Run the turn; answer its result, or stream its events when the client asks.

    A stream request with `Last-Event-ID` is a reconnect: it never runs the command again.
    """
    if wants_stream(request):
        chat_id = str(request.path_params["chat_id"])
        last = request.headers.get("last-event-id")
        if last is None:
            return await streams.open(turn, (chat_id, tenant))
        service: Interlock = request.app.state.service

        def load() -> Chat:
            return service.get_chat(UUID(chat_id), tenant=tenant)

        # A held stream's frames are the chat's data as it ran: none once its erasure began.
        (await asyncio.to_thread(load)).check_not_erasing()
        return streams.rejoin(last, (chat_id, tenant)) or await streams.from_log(load)
    return await run_turn(turn)


async def run_turn(turn: Turn) -> TurnPublic:
    """Run the turn to its result (a JSON answer); a failed turn is a 502."""
    result = await turn(None)
    if result.finish_reason == "failed":
        raise ModelError(result.error or "the model failed", chat_id=result.chat_id,
                         version=result.version, finish_reason="failed")
    return TurnPublic.of(result)
