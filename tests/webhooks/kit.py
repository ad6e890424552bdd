"""Webhook tests' parts: a service with its views and subscriptions, and misbehaving receivers."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from interlock.bootstrap import build_service
from interlock.domain import Agent, FunctionModel, Interlock, Message, ModelRequest, ModelResponse
from interlock.domain import Part as TextPart
from interlock.projections import open_read_models
from interlock.projections.readmodels import SqlReadModels
from interlock.projections.views.webhooks import WebhooksView
from interlock.webhooks.addresses import AddressPolicy
from interlock.webhooks.subscriptions import Subscriptions

LOCAL = ("127.0.0.1",)


def _answer(request: ModelRequest) -> ModelResponse:
    return ModelResponse(message=Message(role="model", content=[TextPart(text="done")]))


ECHO = Agent(name="echoAgent", system="Answers at once.", tools=[],
             model=FunctionModel(_answer, name="echo"))


@dataclass
class Hub:
    """A service, its views (applied in this process), the webhooks view, subscriptions."""

    service: Interlock
    views: SqlReadModels
    hooks: WebhooksView
    subs: Subscriptions

    def turn(self, tenant: str) -> str:
        """A chat of `tenant` with one finished turn (a `turn.finished` notification)."""
        chat = self.service.start_chat("echoAgent", actor="alice", tenant=tenant)
        asyncio.run(self.service.send(chat.id, "hi", actor="alice", tenant=tenant))
        return str(chat.id)

    def current(self) -> None:
        self.views.wait(self.service.recorder.max_notification_id(), timeout=20)


@contextmanager
def hub(store: str, allow: tuple[str, ...] = LOCAL,
        agents: Sequence[Agent] = (ECHO,)) -> Iterator[Hub]:
    service = build_service(store, agents)
    views = open_read_models(service, poll_interval=0.05)
    assert isinstance(views, SqlReadModels)
    hooks = views.view(WebhooksView)
    try:
        yield Hub(service, views, hooks, Subscriptions(service, hooks, AddressPolicy(allow)))
    finally:
        views.close()
        service.close()


def until(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class RawServer:
    """A TCP server on 127.0.0.1 whose every connection is handled by `serve(conn)`."""

    def __init__(self, serve: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.serve, self.stopped = serve, threading.Event()
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the deliverer hung up: what they are for
            self.serve(conn)

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


def read_request(conn: socket.socket) -> bytes:
    """The request's head and body as far as the Content-Length says."""
    got = b""
    while b"\r\n\r\n" not in got:
        got += conn.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += conn.recv(65536)
    return got
