"""The chat cycle's three POSTs served without FastAPI's per-request machinery.

`POST /v1/chats`, `POST /v1/chats/{chat_id}/messages` and `POST /v1/chats/{chat_id}/resume`
are most of what a busy server answers. FastAPI spends on each a route scan over every
included router (twice: once to match, once to handle), a dependency solve, a request
handler with two exit stacks, and a validation of the model the route returned before it
serializes it: about a third of the API layer's instructions a cycle (`bench_instructions`).

`HotRoutes` sits inside the exception middleware (so errors map to the same handlers) and
answers these three requests itself when they are plain: JSON body that validates, no
event stream asked for, a canonical chat id, a sane `Idempotency-Key`. Anything else, any
request whose answer would be a validation error among them, goes on to FastAPI unchanged
with the body it sent, so every 422 is the one FastAPI gives. The work itself is the routes'
own code (`start_chat`, `send_turn`, `resume_turn`, `run_turn`, `_authenticate`); the routes
stay registered for the OpenAPI document and for the requests this lets through.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from interlock.api.auth import Principal, Role
from interlock.api.deps import _authenticate, _bearer
from interlock.api.jsonbody import parse_json
from interlock.api.routers import chats
from interlock.api.routers.common import run_turn
from interlock.api.schemas import ChatCreate, MessageCreate, ResumeRequest

PREFIX = "/v1/chats"
# What FastAPI's UUID parameter accepts among the forms a client sends; the rest (upper
# case, braces, no hyphens, invalid) go to FastAPI, which answers or refuses them itself.
_CHAT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_JSON = b"application/json"
_HEADERS = (b"content-type", b"accept", b"idempotency-key")

Handler = Callable[[Request, Principal, Any, UUID | None, dict[bytes, bytes]],
                   Awaitable[BaseModel]]


async def _create(request: Request, who: Principal, body: Any, _: UUID | None,
                  headers: dict[bytes, bytes]) -> BaseModel:
    key = headers.get(b"idempotency-key")
    return await chats.start_chat(request.app.state.service, body, who,
                                  None if key is None else key.decode("latin-1"))


async def _send(request: Request, who: Principal, body: Any, chat_id: UUID | None,
                _: dict[bytes, bytes]) -> BaseModel:
    assert chat_id is not None
    return await run_turn(chats.send_turn(request.app.state.service, chat_id, body, who))


async def _resume(request: Request, who: Principal, body: Any, chat_id: UUID | None,
                  headers: dict[bytes, bytes]) -> BaseModel:
    assert chat_id is not None
    key = headers.get(b"idempotency-key")
    turn = chats.resume_turn(request.app.state.service, chat_id, body, who,
                             None if key is None else key.decode("latin-1"))
    return await run_turn(turn)


class _Hot:
    """One hot route: its FastAPI route (for the scope, so logs and metrics name it), the
    body model, the role it needs (None: any), its status and its work."""

    def __init__(self, route: BaseRoute, body: type[BaseModel], role: Role | None,
                 status: int, handler: Handler) -> None:
        self.route, self.body, self.role, self.status = route, body, role, status
        self.handler = handler
        self.endpoint = getattr(route, "endpoint", None)


def _routes() -> dict[str, _Hot]:
    by_name = {getattr(r, "name", None): r for r in chats.router.routes}
    return {
        "": _Hot(by_name["create_chat"], ChatCreate, "requester", 201, _create),
        "messages": _Hot(by_name["send_message"], MessageCreate, "requester", 200, _send),
        "resume": _Hot(by_name["resume"], ResumeRequest, None, 200, _resume),
    }


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


class HotRoutes:
    """Pure ASGI: the chat cycle's plain requests answered here, the rest passed on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.hot = _routes()

    def _match(self, scope: Scope) -> tuple[_Hot, str | None] | None:
        if (scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path")
                or "fastapi.telemetry" in scope):  # FastAPI's own telemetry names routes
            return None
        path: str = scope["path"]
        if path == PREFIX:
            return self.hot[""], None
        if not path.startswith(PREFIX + "/"):
            return None
        chat_id, _, action = path[len(PREFIX) + 1:].partition("/")
        hot = self.hot.get(action) if action else None
        if hot is None or not _CHAT_ID.fullmatch(chat_id):
            return None
        return hot, chat_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = self._match(scope)
        if matched is None:
            await self.app(scope, receive, send)
            return
        hot, chat_id = matched
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:  # the first of each, as Starlette's get
            if name in _HEADERS and name not in headers:
                headers[name] = value
        kind = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
        key = headers.get(b"idempotency-key")
        if (kind != _JSON or b"text/event-stream" in headers.get(b"accept", b"")
                or (key is not None and not 1 <= len(key) <= 200)):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        chunks: list[bytes] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # a disconnect: FastAPI's to answer
                await self.app(scope, _replay(messages, receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        try:
            body = hot.body.model_validate(parse_json(b"".join(chunks)))
        except (ValueError, ValidationError):  # bad JSON or a bad body: FastAPI's 422 (the
            # same parse_json refuses it there)
            await self.app(scope, _replay(messages, receive), send)
            return
        scope["route"], scope["endpoint"] = hot.route, hot.endpoint
        scope["path_params"] = {} if chat_id is None else {"chat_id": chat_id}
        request = Request(scope, receive)
        who = _authenticate(request, await _bearer(request))
        if hot.role is not None:
            who.require(hot.role)
        answer = await hot.handler(request, who, body,
                                   None if chat_id is None else UUID(chat_id), headers)
        content = answer.__pydantic_serializer__.to_json(answer, by_alias=True)
        await send({"type": "http.response.start", "status": hot.status, "headers": [
            (b"content-length", str(len(content)).encode("latin-1")),
            (b"content-type", _JSON)]})
        await send({"type": "http.response.body", "body": content})
