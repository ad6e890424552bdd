"""In-process HTTP servers that speak the OpenAI and Anthropic wire protocols from a script."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

SSEEvent = tuple[str | None, Any]  # (event name, data)


@dataclass(frozen=True)
class Call:
    """A scripted tool call; `arguments` is raw JSON text and may be malformed on purpose."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    """A scripted model reply, rendered as JSON or as a stream depending on the request."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    input_tokens: int = 21
    output_tokens: int = 8


@dataclass(frozen=True)
class Failure:
    """A scripted HTTP error answer in the provider's error shape."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Broken:
    """A stream that drops the connection after `after` events of `reply`."""

    reply: Reply
    after: int = 3


@dataclass(frozen=True)
class Slow:
    """A reply that comes only after `delay` seconds (longer than the client waits)."""

    reply: Reply
    delay: float


Item = Reply | Failure | Broken | Slow


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def pieces(text: str, size: int = 4) -> list[str]:
    """`text` cut into small fragments, the way streams deliver it."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class FakeProvider:
    """A provider's HTTP endpoint answering from a queue of replies and failures."""

    path = ""

    def __init__(self) -> None:
        self.script: deque[Item] = deque()
        self.requests: list[Received] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, *items: Item) -> None:
        self.script.extend(items)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def next_item(self) -> Item:
        if not self.script:
            return Failure(400, "fake provider: no scripted reply left")
        return self.script.popleft()

    def body(self, index: int = -1) -> dict[str, Any]:
        """The JSON body of a received request."""
        return self.requests[index].body

    # -- what a request said, read back in Interlock's terms (each provider knows its shape) --

    def system(self, index: int = -1) -> str | None:
        raise NotImplementedError

    def user_texts(self, index: int = -1) -> list[str]:
        raise NotImplementedError

    def tool_calls(self, index: int = -1) -> list[tuple[str, str, Any]]:
        """(call id, tool name, input) of every tool call in the sent history."""
        raise NotImplementedError

    def tool_results(self, index: int = -1) -> list[tuple[str, str]]:
        """(call id, content text) of every tool result in the sent history, in order."""
        raise NotImplementedError

    def tool_schemas(self, index: int = -1) -> dict[str, dict[str, Any]]:
        raise NotImplementedError

    # -- rendering replies --

    def render_json(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def render_events(self, reply: Reply, body: dict[str, Any]) -> list[SSEEvent]:
        raise NotImplementedError

    def render_error(self, failure: Failure) -> dict[str, Any]:
        raise NotImplementedError


def _handler(fake: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests read `fake.requests` instead."""

        def do_POST(self) -> None:
            # A client that gave up (a timeout test) needs no answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.requests.append(Received(self.path, headers, body))
            if self.path != fake.path:
                self._json(404, fake.render_error(Failure(404, f"no route {self.path}")))
                return
            item = fake.next_item()
            if isinstance(item, Slow):
                time.sleep(item.delay)
                item = item.reply
            if isinstance(item, Failure):
                self._json(item.status, fake.render_error(item), item.headers)
            elif isinstance(item, Broken):
                self._stream(fake.render_events(item.reply, body)[: item.after], complete=False)
            elif body.get("stream"):
                self._stream(fake.render_events(item, body))
            else:
                self._json(200, fake.render_json(item, body))

        def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: list[SSEEvent], complete: bool = True) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for name, data in events:
                self._chunk(_sse(name, data))
            if complete:
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.close_connection = True

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def _sse(name: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {text}\n\n".encode()
