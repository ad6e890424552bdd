"""Slow clients are dropped: a request must arrive whole within the read timeout."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from fastapi import FastAPI, Request

from interlock.cli.serve import uvicorn_options
from interlock.settings import Settings
from interlock.slowclients import ReadDeadline, TimedH11Protocol

READ_TIMEOUT = 0.5


@pytest.fixture(params=["default", "h11"])
def server(request: pytest.FixtureRequest,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, int]]:
    """The app served with the protocol `serve` picks (httptools), and with h11's."""
    monkeypatch.setattr(ReadDeadline, "read_timeout", READ_TIMEOUT)
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"size": len(await request.body())}

    @app.get("/slow")
    async def slow() -> dict[str, str]:
        await asyncio.sleep(READ_TIMEOUT * 3)
        return {"ok": "yes"}

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    options = uvicorn_options(Settings(keep_alive_timeout=1.0))
    if request.param == "h11":
        options["http"] = TimedH11Protocol
    config = uvicorn.Config(app, log_level="warning", lifespan="off", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield sock.getsockname()
    server.should_exit = True
    thread.join()
    sock.close()


def _connect(address: tuple[str, int]) -> socket.socket:
    conn = socket.create_connection(address)
    conn.settimeout(5)
    return conn


def _closed_within(conn: socket.socket, seconds: float) -> bool:
    """True if the server closes the connection (EOF or reset) within `seconds`."""
    started = time.monotonic()
    try:
        data = conn.recv(1024)
    except ConnectionResetError:
        data = b""
    except TimeoutError:
        return False
    return (data == b"" or b"408" in data) and time.monotonic() - started <= seconds


def test_clients_trickling_headers_or_body_are_dropped(server: tuple[str, int]) -> None:
    trickling = [_connect(server) for _ in range(3)]
    for conn in trickling:
        conn.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\n")  # headers never finish
    stalled_body = _connect(server)
    stalled_body.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
    silent = _connect(server)
    started = time.monotonic()
    for conn in [*trickling, stalled_body, silent]:
        assert _closed_within(conn, READ_TIMEOUT + 2)
        conn.close()
    assert time.monotonic() - started < READ_TIMEOUT + 2


def test_a_client_sending_bytes_slowly_is_dropped_too(server: tuple[str, int]) -> None:
    conn = _connect(server)
    conn.sendall(b"POST /echo HTTP/1.1\r\n")
    dropped = False
    for _ in range(20):  # one header byte every 0.1 s: keeps resetting an idle timer
        time.sleep(0.1)
        try:
            conn.sendall(b"X")
        except OSError:
            dropped = True
            break
    conn.close()
    assert dropped


def test_a_prompt_client_is_served_and_kept_alive(server: tuple[str, int]) -> None:
    conn = _connect(server)
    for _ in range(2):
        time.sleep(READ_TIMEOUT * 0.6)  # each request arrives in time; the total does not
        conn.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        answer = b""
        while not answer.endswith(b"}"):
            chunk = conn.recv(4096)
            assert chunk, "the server closed a prompt client's connection"
            answer += chunk
        assert answer.endswith(b'{"size":3}')
    answered = time.monotonic()  # then silent: dropped a read timeout after its last answer
    assert _closed_within(conn, READ_TIMEOUT + 2)
    assert time.monotonic() - answered >= READ_TIMEOUT * 0.9
    conn.close()


def test_a_pipelined_request_is_not_late_while_its_handler_runs(
        server: tuple[str, int]) -> None:
    """The request after a pipelined one begins as that one's answer ends: in flight, it is
    not a request that never arrived, however long its handler takes."""
    conn = _connect(server)
    conn.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                 b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while b'{"ok":"yes"}' not in answer:
        chunk = conn.recv(4096)
        assert chunk, "the server dropped a pipelined request while its handler ran"
        answer += chunk
    assert b'{"size":3}' in answer
    conn.close()


def test_a_connection_of_a_worker_sends_small_writes_at_once() -> None:
    """Under `--workers N` each worker gets the listening socket rebuilt from its file
    descriptor (proto 0), where asyncio leaves Nagle on: every response waited for the
    client's delayed ACK (40 ms). The protocol turns TCP_NODELAY on itself."""
    from interlock.slowclients import TimedH11Protocol

    with socket.create_server(("127.0.0.1", 0)) as listener:
        rebuilt = socket.socket(fileno=socket.dup(listener.fileno()))
        with rebuilt, socket.create_connection(listener.getsockname()):
            accepted, _ = rebuilt.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0

                class Transport(asyncio.Transport):
                    def get_extra_info(self, name: str, default: object = None) -> object:
                        return accepted if name == "socket" else default

                protocol = object.__new__(TimedH11Protocol)
                with pytest.raises(AttributeError):  # a bare protocol stops after the socket
                    protocol.connection_made(Transport())
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
