"""Read replicas on a real streaming standby (issue 47, docs/ha.md "Read replicas"): Interlock
on a Patroni pair, its store the multi-host URL, INTERLOCK_READ_REPLICAS the standby.

1. The standby current: the list after a write reads there (the replica's read counter, and
   the standby's own pg_stat_activity showing Interlock's replica session).
2. The standby's replay paused (`pg_wal_replay_pause()`, a replica seconds behind and
   more; Patroni in maintenance mode meanwhile, since it resumes a paused replay): a read
   after a write still shows the write, from the primary once the bound passes; replay
   resumed within the bound: the read waits and is served by the replica.
3. The standby stopped: reads go to the primary at once, `/readyz` names the replica down
   and stays ready; the standby back, reads go to it again.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.sql import SQL, Identifier

from interlock.bootstrap import build_app
from interlock.projections.backends.replicas import APPLICATION_NAME, Replica, Replicas
from interlock.settings import load_settings
from tests.api.server import ThreadServer
from tests.ha.cluster import Node, PatroniCluster

pytestmark = [pytest.mark.ha, pytest.mark.postgres]

WAIT = 2.0  # INTERLOCK_READ_REPLICA_WAIT: seconds a read waits for the standby to catch up


@dataclass(frozen=True)
class Served:
    url: str
    standby: Node
    replicas: Replicas

    @property
    def replica(self) -> Replica:
        return self.replicas.replicas[0]


def _node_url(node: Node) -> str:
    return f"postgresql://postgres@127.0.0.1:{node.port}/postgres"


@pytest.fixture(scope="module")
def served(patroni: PatroniCluster) -> Iterator[Served]:
    standby = patroni.sync_standby()
    assert standby is not None
    schema = f"rr_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(patroni.url, autocommit=True) as conn:
        conn.execute(SQL("CREATE SCHEMA {}").format(Identifier(schema)))
    settings = load_settings(
        store=f"{patroni.url}&schema={schema}", agents="tests.faults.agents:AGENTS",
        store_deadline=1.0, read_replicas=f"{_node_url(standby)}?schema={schema}",
        read_replica_wait=WAIT)
    app = build_app(settings)
    server = ThreadServer(app)
    try:
        yield Served(server.url, standby, app.state.read_models.replicas)
    finally:
        server.stop()


def _on_standby(served: Served, query: str) -> Any:
    with psycopg.connect(_node_url(served.standby), autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(query).fetchone()
        return None if row is None else row[0]


def _write_then_list(served: Served) -> tuple[str, list[str], float]:
    """A chat started (committed on the primary, on the standby's disk, not yet replayed
    there perhaps), then the list of chats: its id, the ids listed, the list's seconds."""
    with httpx.Client(base_url=served.url, timeout=30) as http:
        made = http.post("/v1/chats", json={"agent": "payer"})
        assert made.status_code == 201, made.text
        began = time.monotonic()
        listed = http.get("/v1/chats", params={"limit": 200})
        assert listed.status_code == 200, listed.text
    return (made.json()["id"], [c["chat_id"] for c in listed.json()["items"]],
            time.monotonic() - began)


def test_reads_go_to_the_standby_when_it_is_current(served: Served) -> None:
    reads = served.replica.reads
    chat, listed, seconds = _write_then_list(served)
    assert chat in listed
    assert served.replica.reads == reads + 1, "the list was read on the standby"
    sessions = _on_standby(served, "SELECT count(*) FROM pg_stat_activity"
                                   f" WHERE application_name = '{APPLICATION_NAME}'")
    assert sessions >= 1, "the standby serves Interlock's replica session"
    print(f"\nlist after a write, on the standby: {seconds * 1000:.1f} ms", end="")


@pytest.fixture
def maintenance(patroni: PatroniCluster) -> Iterator[None]:
    """Patroni in maintenance mode: a replay paused by hand stays paused (Patroni resumes it
    at its next loop otherwise)."""
    patroni.maintenance(True)
    try:
        yield
    finally:
        patroni.maintenance(False)


@pytest.mark.usefixtures("maintenance")
def test_a_standby_whose_replay_is_paused_never_answers_behind_the_write(
        served: Served) -> None:
    _on_standby(served, "SELECT pg_wal_replay_pause()")
    try:
        assert _on_standby(served, "SELECT pg_get_wal_replay_pause_state()") != "not paused"
        reads, behind = served.replica.reads, served.replicas.behind
        for _ in range(2):  # each write lands on the standby's disk, none is replayed
            chat, listed, seconds = _write_then_list(served)
            assert chat in listed, "the write is seen: read on the primary"
            assert WAIT <= seconds < WAIT + 3
        assert served.replica.reads == reads and served.replicas.behind == behind + 2
        replayed = _on_standby(served, "SELECT pg_last_wal_receive_lsn() >"
                                       " pg_last_wal_replay_lsn()")
        assert replayed is True, "the standby had the writes, unreplayed"
    finally:
        _on_standby(served, "SELECT pg_wal_replay_resume()")
    print(f"\nstandby paused: a list after a write read on the primary after {seconds:.2f}s"
          f" (the bound: {WAIT}s)", end="")


@pytest.mark.usefixtures("maintenance")
def test_a_standby_that_catches_up_within_the_bound_is_waited_for(served: Served) -> None:
    _on_standby(served, "SELECT pg_wal_replay_pause()")
    resume = threading.Timer(WAIT / 3, _on_standby, (served, "SELECT pg_wal_replay_resume()"))
    try:
        reads, behind = served.replica.reads, served.replicas.behind
        with httpx.Client(base_url=served.url, timeout=30) as http:
            made = http.post("/v1/chats", json={"agent": "payer"})
            assert made.status_code == 201
            resume.start()  # the standby replays the write while the read waits for it
            began = time.monotonic()
            listed = http.get("/v1/chats", params={"limit": 200})
            seconds = time.monotonic() - began
        assert made.json()["id"] in [c["chat_id"] for c in listed.json()["items"]]
        assert served.replica.reads == reads + 1 and served.replicas.behind == behind
        assert seconds < WAIT
    finally:
        resume.join()
        _on_standby(served, "SELECT pg_wal_replay_resume()")
    print(f"\nstandby resumed {WAIT / 3:.2f}s into the read: served by it after {seconds:.2f}s",
          end="")


def test_the_standby_stopped_reads_go_to_the_primary_and_the_server_stays_ready(
        patroni: PatroniCluster, served: Served) -> None:
    patroni.stop_node(served.standby)
    try:
        reads = served.replica.reads
        chat, listed, seconds = _write_then_list(served)  # the primary commits alone
        assert chat in listed and served.replica.reads == reads
        assert seconds < WAIT, "a replica that refuses is not waited for"
        ready = httpx.get(f"{served.url}/readyz", timeout=10)
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        (state,) = ready.json()["replicas"]
        assert state["up"] is False and state["reason"]
    finally:
        patroni.start_node(served.standby)
    patroni.wait(lambda: patroni.sync_standby() is served.standby, 90, "the standby back")
    time.sleep(1.0)  # RETRY_DOWN: the replica is tried again
    seen: list[object] = []

    def read_there() -> bool:
        made, listed, _ = _write_then_list(served)
        assert made in listed
        seen[:] = [served.replica.state(), served.replicas.behind, served.replicas.unavailable,
                   _on_standby(served, "SELECT pg_get_wal_replay_pause_state()")]
        return served.replica.reads > reads

    try:
        patroni.wait(read_there, 60, "reads on the standby again")
    except AssertionError:
        raise AssertionError(f"the replica, behind, unavailable, replay: {seen}") from None
