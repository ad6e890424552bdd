"""A request body larger than the limit is refused before it is read into memory."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import PayloadTooLargeError, error_response


class BodyLimit:
    """Pure ASGI middleware: checks Content-Length, and counts chunked bodies as they come."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(PayloadTooLargeError(self.max_bytes))(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise PayloadTooLargeError(self.max_bytes)
            return message

        await self.app(scope, counted, send)
