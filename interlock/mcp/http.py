"""The HTTP client of an MCP session: the pinned TLS key checked at each handshake, before
a byte of a request leaves, and each JSON answer read within the size cap."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpcore2
import httpx2

from interlock.mcp.pins import spki_sha256

TOO_LARGE_MARK = "interlock: answer over the cap"


class AnswerTooLarge(httpx2.StreamError):
    """A JSON answer past the cap: the SDK fails the call it answers with this message."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"{TOO_LARGE_MARK} ({cap} bytes)")


def http_client(headers: dict[str, str], timeout: httpx2.Timeout, cap: int,
                tls_key_sha256: str | None, on_refusal: Callable[[httpx2.Response], Any],
                on_impostor: Callable[[str], None]) -> httpx2.AsyncClient:
    inner = httpx2.AsyncHTTPTransport()
    if tls_key_sha256 is not None:
        pool = inner._pool  # httpx2 takes no backend argument: its pool gets one
        pool._network_backend = _PinnedBackend(
            pool._network_backend, tls_key_sha256, on_impostor)
    return httpx2.AsyncClient(headers=headers, timeout=timeout,
                              transport=_Bounded(inner, cap),
                              event_hooks={"response": [on_refusal]})


class _Bounded(httpx2.AsyncBaseTransport):
    """Each JSON body read within `cap` bytes (event streams: the SDK's event size cap)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, cap: int) -> None:
        self.inner = inner
        self.cap = cap

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if not response.headers.get("content-type", "").lower().startswith("application/json"):
            return response
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(status_code=response.status_code, headers=response.headers,
                               stream=_BoundedStream(response.stream, self.cap),
                               extensions=response.extensions, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, cap: int) -> None:
        self.inner = inner
        self.cap = cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.inner:
            read += len(chunk)
            if read > self.cap:
                await self.inner.aclose()
                raise AnswerTooLarge(self.cap)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connections whose TLS handshake must show the pinned key before anything is sent."""

    def __init__(self, inner: httpcore2.AsyncNetworkBackend, key_sha256: str,
                 on_impostor: Callable[[str], None]) -> None:
        self.inner = inner
        self.key_sha256 = key_sha256
        self.on_impostor = on_impostor

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None
                          ) -> httpcore2.AsyncNetworkStream:
        stream = await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _PinnedStream(stream, self)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None
                                  ) -> httpcore2.AsyncNetworkStream:
        return _PinnedStream(await self.inner.connect_unix_socket(path, timeout, socket_options),
                             self)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _PinnedStream(httpcore2.AsyncNetworkStream):
    def __init__(self, inner: httpcore2.AsyncNetworkStream, backend: _PinnedBackend) -> None:
        self.inner = inner
        self.backend = backend

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore2.AsyncNetworkStream:
        stream = await self.inner.start_tls(ssl_context, server_hostname, timeout)
        tls = stream.get_extra_info("ssl_object")
        der = tls.getpeercert(binary_form=True) if tls is not None else None
        key = spki_sha256(der) if der else "none"
        if key != self.backend.key_sha256:
            await stream.aclose()
            why = (f"its TLS certificate key has SHA-256 {key[:16]}…, the pin says "
                   f"{self.backend.key_sha256[:16]}…")
            self.backend.on_impostor(why)
            raise httpcore2.ConnectError(f"not the pinned server: {why}")
        return stream
