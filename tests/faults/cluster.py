"""A throwaway PostgreSQL cluster a fault test may stop and start: initdb + pg_ctl on a free
port in a temporary directory, so the shared server and every other test are left alone.

PostgreSQL refuses to run as root: as root (CI containers), the cluster is the `postgres`
user's, in a directory of its own.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import suppress
from pathlib import Path

import psycopg

BIN = Path(os.environ.get("INTERLOCK_PG_BIN", "/usr/lib/postgresql/15/bin"))


OWNER = "postgres"  # who runs the cluster when the tests run as root


def available() -> bool:
    if os.geteuid() == 0 and not _owner_exists():
        return False
    return (BIN / "initdb").is_file() and (BIN / "pg_ctl").is_file()


def _owner_exists() -> bool:
    try:
        pwd.getpwnam(OWNER)
    except KeyError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """One postmaster of our own: `stop()` and `start()` it as a fault; `url` to reach it."""

    def __init__(self) -> None:
        self.root = root = Path(tempfile.mkdtemp(prefix="interlock-faults-"))
        self._as: tuple[str, ...] = ()
        if os.geteuid() == 0:
            owner = pwd.getpwnam(OWNER)
            os.chown(root, owner.pw_uid, owner.pw_gid)
            self._as = ("runuser", "-u", OWNER, "--")
        self.data, self.port = root / "data", _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._run(BIN / "initdb", "-D", self.data, "-U", "postgres", "--auth=trust",
                  "--no-sync", "-E", "UTF8")
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {root} -c fsync=off"
                   " -c max_connections=200 -c shared_buffers=16MB")
        self._start = (BIN / "pg_ctl", "-D", self.data, "-o", options, "-l", root / "log", "-w",
                       "start")
        self.start()

    def _run(self, *command: object) -> None:
        subprocess.run([*self._as, *(str(c) for c in command)], check=True,
                       capture_output=True, timeout=60)

    def start(self) -> None:
        self._run(*self._start)

    def stop(self) -> None:
        """A fast shutdown: sessions are ended, transactions in flight roll back."""
        self._run(BIN / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def freeze(self) -> None:
        """Stop every process of the cluster (SIGSTOP): it accepts, its kernel acknowledges,
        nothing answers, as a server stalled on its disk or swapping."""
        for pid in self._pids():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self._pids():
            os.kill(pid, signal.SIGCONT)

    def _pids(self) -> list[int]:
        """The postmaster (from its pid file) and its children."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
        return [postmaster, *(int(c) for c in children)]

    def schema(self, name: str) -> str:
        """A store URL in a new schema of this cluster."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.url}?schema={name}"

    def terminate(self, like: str, seconds: float) -> int:
        """For `seconds`, end every session caught running a statement that contains `like`
        (pg_terminate_backend); how many were ended."""
        ended = 0
        with psycopg.connect(self.url, autocommit=True) as conn:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                row = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE state = 'active' AND query LIKE %s AND pid <> pg_backend_pid()",
                    (f"%{like}%",)).fetchone()
                ended += int(row[0]) if row else 0
        return ended

    def remove(self) -> None:
        with suppress(subprocess.CalledProcessError):  # already stopped
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
