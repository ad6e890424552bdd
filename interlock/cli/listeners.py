"""Each worker process listens on a socket of its own, so the kernel spreads connections.

uvicorn's workers share one listening socket, and whichever worker wakes first accepts every
connection waiting: a burst of keep-alive connections (a load balancer's pool, a benchmark's
64 clients) lands mostly on one worker. Measured with two workers: 73 % and 27 % of the
server's CPU, and no more cycles a second than one worker. Here the parent binds the port
(port 0 picks one) and never listens on it; each worker, before uvicorn listens, puts a
socket of its own in the same SO_REUSEPORT group in place of the one it inherited (same
file descriptor), and Linux hashes each new connection to one of the workers' sockets.
"""

from __future__ import annotations

import os
import socket
import sys

from fastapi import FastAPI

from interlock.bootstrap import create_app

ENV = "INTERLOCK_LISTEN_FD"  # the inherited socket's descriptor, in each worker
FACTORY = "interlock.cli.listeners:worker_app"


def supported() -> bool:
    """SO_REUSEPORT balances connections across sockets on Linux only (BSDs and macOS give
    them all to the last socket bound)."""
    return sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")


def reserve(host: str, port: int) -> socket.socket:
    """The parent's socket: bound in the SO_REUSEPORT group, inherited by the workers, never
    listened on (a socket that does not listen is given no connection). The port is first
    bound alone, so a port another server holds is refused (OSError) even when that server
    would share it: two servers on one port by mistake must not split its connections."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as alone:
        alone.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        alone.bind((host, port))
        address = alone.getsockname()  # port 0: the one the system picked
    sock = _bound(family, address)
    sock.set_inheritable(True)
    os.environ[ENV] = str(sock.fileno())  # the workers are spawned with this environment
    return sock


def own_listener() -> None:
    """In a worker: the inherited socket's descriptor now names a socket of this worker's own,
    bound to the same address, which uvicorn then listens on."""
    fd = os.environ.pop(ENV, None)  # nothing this worker starts inherits it
    if not fd:
        return
    inherited = socket.socket(fileno=os.dup(int(fd)))
    try:
        family, address = inherited.family, inherited.getsockname()
    finally:
        inherited.close()
    own = _bound(family, address)
    os.dup2(own.fileno(), int(fd), inheritable=False)
    own.close()


def worker_app() -> FastAPI:
    """uvicorn's factory in each worker: its own listener, then the app."""
    own_listener()
    return create_app()


def _bound(family: socket.AddressFamily, address: tuple[str, int] | tuple[str, int, int, int],
           ) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock
