"""Several server processes on one store: `interlock serve --workers 2` and `uvicorn --factory`."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from interlock.client import Client
from tests.api.server import SERVE, ServeProcess

UVICORN = (sys.executable, "-m", "uvicorn", "--factory", "interlock.bootstrap:create_app")
NO_KEYS = {"INTERLOCK_API_KEYS": "", "INTERLOCK_API_KEYS_FILE": ""}


def banking_cycle(url: str) -> None:
    """The demo agent answers; a transfer interrupts, is approved, and every request agrees."""
    with Client(url) as dev:
        assert dev.chat("bankingAgent").send("hello").finish_reason == "stop"
        chat = dev.chat("bankingAgent")
        [approval] = chat.send("Transfer $2000 to savings.").interrupts
        [limit] = chat.resume(respond=[approval.respond({"approved": True})]).interrupts
        done = chat.resume(restart=[limit.restart(resumed_metadata={"override": True})])
        assert (done.finish_reason, "Done." in done.text) == ("stop", True)
        version = chat.state()["version"]
    for _ in range(8):  # fresh connections: whichever worker answers sees the same chat
        with Client(url) as again:
            assert again.open_chat(chat.id).state()["version"] == version
            assert len(again.decisions(chat_id=chat.id)["items"]) == 2


def started_workers(server: ServeProcess) -> set[str]:
    return set(re.findall(r"Started server process \[(\d+)\]", "".join(server.log)))


def test_serve_with_two_workers_on_one_sqlite_file(sqlite_store: str) -> None:
    server = ServeProcess("--workers", "2", "--store", sqlite_store, env=NO_KEYS, workers=2)
    try:
        banking_cycle(server.url)
        assert len(server.workers()) == 2
    finally:
        server.stop()
    assert len(started_workers(server)) == 2


@pytest.mark.postgres
def test_uvicorn_factory_with_two_workers_on_postgres(pg_store: str) -> None:
    server = ServeProcess("--workers", "2", command=UVICORN, workers=2,
                          env={**NO_KEYS, "INTERLOCK_STORE": pg_store})
    try:
        banking_cycle(server.url)
        assert len(server.workers()) == 2
    finally:
        server.stop()
    assert len(started_workers(server)) == 2


def sockets_of(pid: int, port: int, state: str) -> set[str]:
    """The inodes of `pid`'s TCP sockets on local `port` in `state` (/proc/net/tcp's hex:
    0A listening, 01 established)."""
    held = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port and fields[3] == state and f"socket:[{fields[9]}]" in held:
            found.add(fields[9])
    return found


def test_each_worker_listens_on_its_own_socket_and_gets_its_share(sqlite_store: str) -> None:
    """uvicorn's workers shared one listening socket, and whichever woke first accepted
    every connection waiting: a pool of keep-alive connections opened at once went mostly
    to one worker (73 % of the CPU, two workers no faster than one). Each worker now
    listens on a socket of its own in one SO_REUSEPORT group, and the kernel spreads them."""
    server = ServeProcess("--workers", "2", "--store", sqlite_store, env=NO_KEYS, workers=2)
    try:
        port = int(server.url.rsplit(":", 1)[1])
        workers = server.workers()
        listening = [sockets_of(pid, port, "0A") for pid in workers]
        assert all(listening) and not listening[0] & listening[1], listening
        pool = [socket.create_connection(("127.0.0.1", port)) for _ in range(64)]
        try:
            for conn in pool:  # each answered: accepted by a worker
                conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert conn.recv(4096).startswith(b"HTTP/1.1 200")
            shares = [len(sockets_of(pid, port, "01")) for pid in workers]
        finally:
            for conn in pool:
                conn.close()
        assert sum(shares) == 64 and min(shares) >= 16, shares  # 1 in 30,000 by chance
    finally:
        server.stop()


def test_a_second_server_on_a_port_workers_share_is_refused(sqlite_store: str) -> None:
    """The workers' sockets share their port with each other only: a second `serve` on it
    by mistake is refused with a line that says why, instead of taking half its clients."""
    server = ServeProcess("--workers", "2", "--store", sqlite_store, env=NO_KEYS, workers=2)
    try:
        port = server.url.rsplit(":", 1)[1]
        second = subprocess.run(
            [*SERVE, "--workers", "2", "--port", port, "--store", sqlite_store],
            env={**os.environ, **NO_KEYS}, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stderr
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in second.stderr
    finally:
        server.stop()
