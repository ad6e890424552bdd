"""One webhook POST under a total deadline, to a checked address, reading only its status.

The deadline covers resolving, connecting, TLS, sending and the answer's status line: each
socket operation waits at most what is left of it, so a receiver that drips a byte a second
cannot stretch an attempt. Of the answer only the first `read_limit` bytes are read (the
status line must be among them); the rest is never read, the connection is closed.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

from interlock.webhooks.addresses import AddressPolicy

READ_LIMIT = 4096


class DeliveryError(Exception):
    """An attempt that got no usable answer (its text is the outbox row's `last_error`)."""


class Deadline:
    """The time left of one attempt."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.until = seconds, time.monotonic() + seconds

    def left(self) -> float:
        left = self.until - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer within the {self.seconds:g} s deadline")
        return left


def post(url: str, body: bytes, headers: Mapping[str, str], addresses: AddressPolicy,
         timeout: float, read_limit: int = READ_LIMIT) -> int:
    """POST `body` to `url`; the answer's status code."""
    deadline = Deadline(timeout)
    try:
        return _post(url, body, headers, addresses, deadline, read_limit)
    except TimeoutError:  # a socket's own says only "timed out"
        raise TimeoutError(f"no answer within the {timeout:g} s deadline") from None


def _post(url: str, body: bytes, headers: Mapping[str, str], addresses: AddressPolicy,
          deadline: Deadline, read_limit: int) -> int:
    parts = urlsplit(url)
    host, tls = parts.hostname or "", parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    address = addresses.addresses(host, port, deadline.left())[0]
    with socket.create_connection((str(address), port), timeout=deadline.left()) as raw:
        sock = raw
        if tls:
            sock = ssl.create_default_context().wrap_socket(raw, server_hostname=host)
        sock.settimeout(deadline.left())
        sock.sendall(_request(parts.netloc, parts.path or "/", parts.query, body, headers))
        return _status(sock, deadline, read_limit)


def _request(netloc: str, path: str, query: str, body: bytes,
             headers: Mapping[str, str]) -> bytes:
    target = path + ("?" + query if query else "")
    lines = [f"POST {target} HTTP/1.1", f"Host: {netloc.rpartition('@')[2]}",
             "Content-Type: application/json", f"Content-Length: {len(body)}",
             "Connection: close", "User-Agent: interlock-webhooks",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _status(sock: socket.socket, deadline: Deadline, read_limit: int) -> int:
    """The status code of the answer's first line, read within the deadline and the limit."""
    got = b""
    while b"\r\n" not in got:
        if len(got) >= read_limit:
            raise DeliveryError(f"no status line in the answer's first {read_limit} bytes")
        sock.settimeout(deadline.left())
        chunk = sock.recv(min(1024, read_limit - len(got)))
        if not chunk:
            raise DeliveryError("the receiver closed the connection without an answer")
        got += chunk
    line = got.split(b"\r\n", 1)[0].split()
    if len(line) < 2 or not line[0].startswith(b"HTTP/") or not line[1].isdigit():
        raise DeliveryError(f"not an HTTP answer: {got[:80]!r}")
    return int(line[1])
