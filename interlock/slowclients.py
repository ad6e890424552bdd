"""uvicorn protocols that drop a client which does not send its whole request in time.

uvicorn's keep-alive timeout only covers an idle connection between requests: a client
that trickles its headers or its body keeps a connection (and a slot) forever. Here a
request must arrive whole, headers and body, within `read_timeout` seconds of the
connection opening or of the previous response ending; otherwise the connection closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from interlock.settings import load_settings

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is optional: h11 serves alone
    HttpToolsProtocol = None  # type: ignore[assignment,misc]



def _no_delay(transport: asyncio.BaseTransport) -> None:
    """Send small writes at once (TCP_NODELAY), as asyncio does for the sockets it opens.

    Under `--workers N` uvicorn hands each worker the listening socket rebuilt from its
    file descriptor, with `proto` 0, and asyncio sets TCP_NODELAY only on sockets whose
    proto is TCP: each response's head and body then met Nagle and the client's delayed
    ACK, 40 ms a request.
    """
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


@functools.cache
def configured_read_timeout() -> float:
    """INTERLOCK_READ_TIMEOUT, read once per process (each worker reads its own)."""
    return load_settings().read_timeout


class ReadDeadline:
    """Mixin for a uvicorn HTTP protocol: one read deadline per request.

    Each response moves the deadline; the timer is not remade for it. It fires at the
    deadline it was set for and, when a response moved the deadline since, is set again
    for the new one: a kept-alive connection makes one timer a read timeout, not one (and a
    cancelled one) a request."""

    read_timeout: float | None = None  # None: from the settings
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any
    _deadline: asyncio.TimerHandle | None = None
    _due = 0.0  # the loop's time by which the next request must have arrived whole

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        _no_delay(transport)
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm(self) -> None:
        self._due = self.loop.time() + (self.read_timeout or configured_read_timeout())
        if self._deadline is None:
            self._deadline = self.loop.call_at(self._due, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.loop.time() < self._due:  # a response since moved it: wait for that one
            self._deadline = self.loop.call_at(self._due, self._expire)
            return
        cycle = self.cycle
        # No request in flight: none began, or the last one was answered (one begun by a
        # pipelined request inside on_response_complete is in flight, not late).
        headers_late = cycle is None or cycle.response_complete
        body_late = cycle is not None and cycle.more_body and not cycle.response_started
        if headers_late or body_late:
            self.transport.close()


class TimedH11Protocol(ReadDeadline, H11Protocol):
    """h11 with a read deadline."""


if HttpToolsProtocol is not None:

    class TimedHttpToolsProtocol(ReadDeadline, HttpToolsProtocol):
        """httptools (the faster parser) with a read deadline."""


def protocol_class() -> type[asyncio.Protocol]:
    """The fastest available HTTP protocol, with a read deadline (module-level: picklable)."""
    if HttpToolsProtocol is not None:
        return TimedHttpToolsProtocol
    return TimedH11Protocol
