"""Polls `/readyz` from a thread and records each answer's status and latency."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx

EVERY = 0.1  # seconds between probes, as a load balancer's health check, only faster


@dataclass
class Readiness:
    url: str
    seen: list[tuple[float, int, float]] = field(default_factory=list)  # sent, status, seconds
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Readiness:
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(30)

    def _poll(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as http:
            while not self._stopping.wait(EVERY):
                sent = time.monotonic()
                status = http.get("/readyz").status_code
                self.seen.append((sent, status, time.monotonic() - sent))

    def first(self, status: int, after: float) -> float | None:
        """When the first probe sent after `after` answered `status`."""
        return next((sent for sent, s, _ in list(self.seen) if sent >= after and s == status),
                    None)
