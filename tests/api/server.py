"""A real uvicorn server on 127.0.0.1 in a thread (or an `interlock serve` subprocess)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import uvicorn
from fastapi import FastAPI

ROOT = Path(__file__).resolve().parents[2]
_RUNNING = re.compile(r"Uvicorn running on (http://\S+)")


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class ThreadServer:
    """Serves `app` on a socket bound before start, so the port is known and free."""

    def __init__(self, app: FastAPI) -> None:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so,
        # and without it Nagle plus delayed ACKs add ~40 ms to every exchange.
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        ready = threading.Event()
        config = uvicorn.Config(app, access_log=False, log_level="warning", lifespan="on")
        self.server = _Server(config, ready)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not ready.wait(30):
            raise RuntimeError("uvicorn did not start")

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


SERVE = (sys.executable, "-m", "interlock.cli.main", "serve")


SERVED_SECRET = "test-secret-of-the-served-tests-0123456789"


class ServeProcess:
    """`python -m interlock.cli.main serve --port 0 ...` (or `command`), up and answering.

    The URL is in uvicorn's "running on" line. With `workers`, that line comes from the
    parent before any worker listens: wait until each worker says its startup is complete.
    """

    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        command: tuple[str, ...] = SERVE,
        workers: int = 0,
    ) -> None:
        self.proc = subprocess.Popen(
            [*command, "--port", "0", *args],
            # A secret of the tests' own: serve refuses API keys with the public dev secret
            # or one shorter than 32 bytes.
            cwd=ROOT, env={"INTERLOCK_SECRET": SERVED_SECRET, **os.environ, **(env or {})},
            stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stderr is not None
        self.log: list[str] = []
        self.url = ""
        started = 0
        for line in self.proc.stderr:
            self.log.append(line)
            if match := _RUNNING.search(line):
                self.url = match[1]
            started += "Application startup complete" in line
            if self.url and started >= workers:
                break
        else:
            self.proc.wait(30)
            self.proc.stderr.close()
            raise RuntimeError("interlock serve exited:\n" + "".join(self.log))
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def workers(self) -> list[int]:
        """The worker processes uvicorn spawned (Linux: read from /proc)."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        return [pid for pid in map(int, children.split())
                if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self._drainer.join(30)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
