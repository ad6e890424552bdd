"""A request body larger than the limit is refused before it is read into memory."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from interlock.api.errors import PayloadTooLargeError, error_response


class BodyLimit:
    """Pure ASGI middleware: checks Content-Length; a chunked body is read up to the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > self.max_bytes:
                await error_response(PayloadTooLargeError(self.max_bytes))(scope, receive, send)
            else:  # the server reads exactly the declared length
                await self.app(scope, receive, send)
            return
        body = await self._read_chunked(receive)
        if body is None:
            await error_response(PayloadTooLargeError(self.max_bytes))(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read_chunked(self, receive: Receive) -> list[Message] | None:
        """A body without Content-Length, read up to the limit (None when it is larger)."""
        messages, seen = [], 0
        while True:
            message = await receive()
            messages.append(message)
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                return None
            if message["type"] != "http.request" or not message.get("more_body", False):
                return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
