"""A webhook receiver on 127.0.0.1 that can be down (nothing listens) and come back."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook


class Receiver:
    """Verifies each POST with the Standard Webhooks reference library and keeps it."""

    def __init__(self) -> None:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()  # nothing listens until `up()`: deliveries are refused meanwhile
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.secret: str | None = None
        self.received: list[tuple[str, Any]] = []
        self.rejected: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    assert receiver.secret is not None
                    payload = Webhook(receiver.secret).verify(body, dict(self.headers))
                except Exception as exc:  # noqa: BLE001 - any failure to verify is a rejection
                    receiver.rejected.append(repr(exc))
                    self.send_response(400)
                else:
                    receiver.received.append((self.headers["webhook-id"], payload))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                """Quiet."""

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
