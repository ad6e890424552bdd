"""A PostgreSQL cluster under Patroni, from nothing: one etcd member and two PostgreSQL 15 nodes
on loopback ports under a temporary folder, synchronous replication (docs/ha.md).

Patroni decides who is primary; this helper only starts the processes, asks Patroni's REST API
who leads, kills a primary's postmaster (the fault) and asks `patronictl` for a switchover.
PostgreSQL refuses to run as root, so as root the nodes (Patroni included) run as `postgres`,
from a Patroni installed with a world-readable interpreter (INTERLOCK_PATRONI, .ci/run).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import suppress
from pathlib import Path

import httpx

from tests.faults.cluster import BIN, _free_port

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ha.md"
PATRONI = Path(os.environ.get("INTERLOCK_PATRONI", "/opt/interlock-patroni/bin/patroni"))
if not PATRONI.is_file():
    PATRONI = ROOT / ".venv-patroni" / "bin" / "patroni"
ETCD = Path(shutil.which("etcd") or "/usr/bin/etcd")
OWNER = "postgres"
SCOPE = "interlock-ha"


def missing() -> str | None:
    """What this machine lacks to run the cluster; None if nothing."""
    for path, what in ((PATRONI, "Patroni (INTERLOCK_PATRONI)"), (ETCD, "etcd (etcd-server)"),
                       (BIN / "postgres", "PostgreSQL 15")):
        if not path.is_file():
            return f"{what} is not installed at {path}"
    if os.geteuid() == 0:
        with suppress(KeyError):
            pwd.getpwnam(OWNER)
            return None
        return f"no {OWNER} user to run PostgreSQL as"
    return None


NODE_CONFIG = """\
scope: {scope}
name: {name}
log: {{dir: {root}, level: WARNING}}
restapi: {{listen: '127.0.0.1:{rest}', connect_address: '127.0.0.1:{rest}'}}
etcd3: {{hosts: '127.0.0.1:{etcd}'}}
postgresql:
  listen: '127.0.0.1:{port}'
  connect_address: '127.0.0.1:{port}'
  data_dir: {root}/data
  bin_dir: {bin}
  pgpass: {root}/pgpass
  authentication:
    superuser: {{username: postgres, password: postgres}}
    replication: {{username: postgres, password: postgres}}
  pg_hba:
    - local all all trust
    - local replication all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  parameters: {{unix_socket_directories: '{root}', fsync: 'off', max_connections: 200,
                shared_buffers: 16MB}}
"""


def cluster_settings() -> str:
    """The cluster-wide part of every node's patroni.yml: docs/ha.md's YAML block, as written."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert len(blocks) == 1, "docs/ha.md shows one Patroni configuration"
    return str(blocks[0])


class Node:
    def __init__(self, root: Path, name: str, etcd: int) -> None:
        self.name, self.root = name, root / name
        self.port, self.rest = _free_port(), _free_port()
        self.root.mkdir()
        self.config = self.root / "patroni.yml"
        self.config.write_text(NODE_CONFIG.format(
            scope=SCOPE, name=name, root=self.root, rest=self.rest, etcd=etcd, port=self.port,
            bin=BIN) + cluster_settings())
        self.process: subprocess.Popen[bytes] | None = None

    def role(self) -> str | None:
        """What Patroni says this node is ("primary", "replica"), None if it does not answer."""
        try:
            return str(httpx.get(f"http://127.0.0.1:{self.rest}/patroni", timeout=1)
                       .json().get("role"))
        except (httpx.HTTPError, ValueError):
            return None

    def is_sync_standby(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.rest}/synchronous",
                             timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def postmaster(self) -> int | None:
        try:
            return int((self.root / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


class PatroniCluster:
    """etcd and two nodes; `url` names both, for the node that takes writes."""

    def __init__(self, nodes: int = 2) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="interlock-ha-"))
        self._user: dict[str, object] = {}
        if os.geteuid() == 0:
            owner = pwd.getpwnam(OWNER)
            self._user = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        self.etcd_port, peer = _free_port(), _free_port()
        self.nodes = [Node(self.root, f"node{i}", self.etcd_port) for i in range(nodes)]
        self._chown()
        self.processes: list[subprocess.Popen[bytes]] = []
        etcd_url, peer_url = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{peer}"
        self.etcd = self._spawn("etcd", ETCD, "--name", "e0", "--data-dir", self.root / "etcd",
                                "--listen-client-urls", etcd_url, "--advertise-client-urls",
                                etcd_url, "--listen-peer-urls", peer_url,
                                "--initial-advertise-peer-urls", peer_url,
                                "--initial-cluster", f"e0={peer_url}")
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        self.url = f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"

    def _chown(self) -> None:
        if not self._user:
            return
        uid, gid = self._user["user"], self._user["group"]
        for path in [self.root, *self.root.rglob("*")]:
            os.chown(path, uid, gid)  # type: ignore[arg-type]

    def _spawn(self, name: str, *command: object) -> subprocess.Popen[bytes]:
        with (self.root / f"{name}.out").open("wb") as log:  # the child keeps its own
            process: subprocess.Popen[bytes] = subprocess.Popen(
                [str(c) for c in command], stdout=log, stderr=log, cwd=self.root,
                env={**os.environ, "HOME": str(self.root)}, start_new_session=True,
                **self._user)  # type: ignore[call-overload]
        self.processes.append(process)
        return process

    def start(self, timeout: float = 60.0) -> float:
        """Start every node's Patroni; the seconds until a primary and a sync standby."""
        began = time.monotonic()
        for node in self.nodes:
            self.start_node(node)
        self.wait(lambda: self.primary() is not None and self.sync_standby() is not None,
                  timeout, "a primary and a synchronous standby")
        return time.monotonic() - began

    def primary(self) -> Node | None:
        return next((n for n in self.nodes if n.role() == "primary"), None)

    def sync_standby(self) -> Node | None:
        return next((n for n in self.nodes if n.is_sync_standby()), None)

    def wait(self, check: object, timeout: float, what: str) -> float:
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            if check():  # type: ignore[operator]
                return time.monotonic()
            for process in self.processes:
                if process.poll() is not None and process is self.etcd:
                    raise AssertionError(f"etcd exited: {self.logs()}")
            time.sleep(0.1)
        raise AssertionError(f"{what} not within {timeout}s: {self.logs()}")

    def kill_primary(self) -> Node:
        """SIGKILL the primary's postmaster (its node's Patroni lives on); that node."""
        node = self.primary()
        assert node is not None, "no primary to kill"
        pid = node.postmaster()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        return node

    def kill_node(self, node: Node) -> None:
        """The whole node lost at once: SIGKILL to its Patroni's process group and to its
        postmaster's (Patroni starts PostgreSQL in a session of its own, so that group holds
        the postmaster and every backend). Nobody demotes it or releases its leader key: the
        key expires after `ttl`."""
        assert node.process is not None and node.process.poll() is None
        pid = node.postmaster()
        assert pid is not None
        groups = {os.getpgid(node.process.pid)}
        with suppress(ProcessLookupError):
            groups.add(os.getpgid(pid))
        assert os.getpgid(0) not in groups, "would kill the test itself"
        for group in groups:
            with suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        node.process.wait(10)

    def ttl(self) -> int:
        """Patroni's `ttl` as docs/ha.md's configuration sets it (seconds)."""
        found = re.search(r"^\s+ttl: (\d+)$", cluster_settings(), re.MULTILINE)
        assert found is not None
        return int(found[1])

    def stop_node(self, node: Node) -> None:
        """Stop a node's Patroni, which stops its PostgreSQL: the machine gone, cleanly."""
        assert node.process is not None
        node.process.terminate()
        node.process.wait(60)

    def start_node(self, node: Node) -> None:
        node.process = self._spawn(node.name, PATRONI, node.config)

    def switchover(self, to: Node) -> None:
        """A planned switchover to `to`, as an operator asks for it."""
        leader = self.primary()
        assert leader is not None
        ctl = PATRONI.with_name("patronictl")
        done = subprocess.run(
            [str(ctl), "-c", str(leader.config), "switchover", SCOPE, "--leader", leader.name,
             "--candidate", to.name, "--force"], capture_output=True, timeout=60,
            **self._user)  # type: ignore[call-overload]
        assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()

    def maintenance(self, on: bool) -> None:
        """Patroni's maintenance mode (`patronictl pause`, `resume`), waiting for every node:
        Patroni then leaves the nodes alone. Outside it, Patroni resumes a standby's WAL
        replay paused by hand (`pg_wal_replay_pause()`) at its next loop."""
        node = self.primary() or self.nodes[0]
        ctl = PATRONI.with_name("patronictl")
        done = subprocess.run(
            [str(ctl), "-c", str(node.config), "pause" if on else "resume", SCOPE, "--wait"],
            capture_output=True, timeout=60, **self._user)  # type: ignore[call-overload]
        assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()

    def logs(self) -> str:
        tails = []
        for path in sorted(self.root.rglob("*.out")) + sorted(self.root.rglob("*.log")):
            with suppress(OSError):
                tails.append(f"--- {path.name}\n" + path.read_text(errors="replace")[-1500:])
        return "\n".join(tails)

    def remove(self) -> None:
        """Patroni first (it stops its PostgreSQL), then any postmaster left, then etcd."""
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(20)
                except subprocess.TimeoutExpired:
                    node.process.kill()
            pid = node.postmaster()
            if pid is not None:
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self.etcd.terminate()
        with suppress(subprocess.TimeoutExpired):
            self.etcd.wait(10)
        if self.etcd.poll() is None:
            self.etcd.kill()
        shutil.rmtree(self.root, ignore_errors=True)
