"""Clients cycling through the payer agent over HTTP, every answer recorded with its timing."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx


@dataclass(frozen=True)
class Answer:
    what: str  # "create" or "send"
    status: int
    code: str | None
    retry_after: str | None
    started: float
    ended: float
    chat: str | None

    @property
    def seconds(self) -> float:
        return self.ended - self.started


@dataclass
class Load:
    """`clients` threads creating a chat and sending it a message, until `stop()`."""

    url: str
    clients: int = 6
    answers: list[Answer] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Load:
        self._threads = [threading.Thread(target=self._client, daemon=True)
                         for _ in range(self.clients)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(60)

    def _client(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while not self._stopping.is_set():
                chat = self._call(http, "create", "/v1/chats", {"agent": "payer"}, None)
                if chat is not None:
                    self._call(http, "send", f"/v1/chats/{chat}/messages", {"text": "pay"}, chat)
                else:
                    time.sleep(0.05)  # as a client honouring Retry-After would, only shorter

    def _call(self, http: httpx.Client, what: str, path: str, body: dict[str, str],
              chat: str | None) -> str | None:
        started = time.monotonic()
        reply = http.post(path, json=body)
        ended = time.monotonic()
        data = reply.json()
        code = data.get("error", {}).get("code") if reply.status_code >= 400 else None
        made = data.get("id") if what == "create" and reply.status_code == 201 else chat
        with self._lock:
            self.answers.append(Answer(what, reply.status_code, code,
                                       reply.headers.get("retry-after"), started, ended, made))
        return made if reply.status_code < 300 else None

    def between(self, start: float, end: float) -> list[Answer]:
        """The answers to requests sent after `start` that came back before `end`."""
        with self._lock:
            return [a for a in self.answers if a.started >= start and a.ended <= end]
