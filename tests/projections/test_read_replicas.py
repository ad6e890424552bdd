"""Read replicas (INTERLOCK_READ_REPLICAS, docs/ha.md): the read side's queries go to a
replica whose own copy of the view has applied the request's position, else (behind past
the bound, down, refusing) to the primary; never an answer behind the client's write.

Here the "replicas" are databases of one server: the store's own database (a replica always
current) and a database whose views apply nothing (a replica that never catches up). A real
streaming standby under Patroni, paused, is tests/ha/test_read_replicas.py.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg.conninfo import conninfo_to_dict
from psycopg.sql import SQL, Identifier

from interlock.bootstrap import build_app, build_service
from interlock.domain.errors import ConfigurationError
from interlock.projections import open_views
from interlock.projections.backends.replicas import ReplicaUnavailableError, open_replicas
from interlock.settings import load_settings
from tests.conftest import PG_URL

AGENTS = "tests.faults.agents:AGENTS"
STORE = "postgresql://u@h1:5432/db?schema=s"


@pytest.mark.parametrize(("urls", "store", "says"), [
    ("postgresql://u@r1/db", "sqlite:///x.db", "standbys of a PostgreSQL store"),
    ("sqlite:///y.db", STORE, "is not a postgresql:// URL"),
    ("postgresql://u@r1/db?schema=other", STORE, "schema=other is not the store's (s)"),
    ("postgresql://u@r1/db?pool_size=0", STORE, "pool_size='0' is not a whole number"),
    ("postgresql://u@r1/db?nonsense=1", STORE, "is not one libpq reads"),
    ("postgresql://u@r1:x/db", STORE, "port 'x' is not a port number"),
    ("   ", STORE, "names no URL"),
])
def test_a_replica_url_that_cannot_be_one_is_refused_naming_it(urls: str, store: str,
                                                               says: str) -> None:
    with pytest.raises(ConfigurationError, match="INTERLOCK_READ_REPLICAS") as found:
        open_replicas(urls, store, 1.0)
    assert says in str(found.value)


def test_replicas_are_named_without_their_passwords_and_may_name_the_stores_schema() -> None:
    replicas = open_replicas("postgresql://u:pw@r1/db?schema=s  postgresql://u@r2,r3/db"
                             "?target_session_attrs=standby", STORE, 0.5)
    assert [r.name for r in replicas.replicas] == [
        "postgresql://u:***@r1/db?schema=s",
        "postgresql://u@r2,r3/db?target_session_attrs=standby"]
    assert replicas.wait == 0.5


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_READ_REPLICAS", "postgresql://u@r1/db")
    monkeypatch.setenv("INTERLOCK_READ_REPLICA_WAIT", "0.25")
    settings = load_settings()
    assert (settings.read_replicas, settings.read_replica_wait) == ("postgresql://u@r1/db", 0.25)
    with pytest.raises(ConfigurationError, match="INTERLOCK_READ_REPLICA_WAIT"):
        load_settings(read_replica_wait=-1)


def _url(dbname: str, schema: str) -> str:
    where = conninfo_to_dict(PG_URL)
    return (f"postgresql://{where.get('user', 'postgres')}@{where.get('host', '127.0.0.1')}:"
            f"{where.get('port', 5432)}/{dbname}?schema={schema}")


@pytest.fixture(scope="module")
def other_database() -> Iterator[str]:
    """A database of the same server, dropped after the module."""
    dbname = f"replica_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(SQL("CREATE DATABASE {}").format(Identifier(dbname)))
    try:
        yield dbname
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(SQL("DROP DATABASE {} WITH (FORCE)").format(Identifier(dbname)))


@pytest.fixture
def behind(pg_store: str, other_database: str) -> Iterator[str]:
    """Another database whose views, in pg_store's schema, apply nothing: a replica never
    current."""
    schema = pg_store.rpartition("schema=")[2]
    url = _url(other_database, schema)
    with psycopg.connect(url.partition("?")[0], autocommit=True) as conn:
        conn.execute(SQL("CREATE SCHEMA {}").format(Identifier(schema)))
    try:
        service = build_service(url)
        open_views(service).close()  # the views' tables, empty, their positions 0
        service.close()
        yield url
    finally:
        with psycopg.connect(url.partition("?")[0], autocommit=True) as conn:
            conn.execute(SQL("DROP SCHEMA {} CASCADE").format(Identifier(schema)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(store: str, replicas: str, wait: float = 1.0) -> TestClient:
    return TestClient(build_app(load_settings(store=store, agents=AGENTS, read_replicas=replicas,
                                              read_replica_wait=wait)),
                      client=("127.0.0.1", 50000))  # dev mode: loopback callers only


def _write_then_list(client: TestClient) -> tuple[str, list[str], float]:
    """A chat started, then the list of chats: the chat's id, the ids listed, and the
    seconds the list took."""
    made = client.post("/v1/chats", json={"agent": "payer"})
    assert made.status_code == 201, made.text
    began = time.monotonic()
    listed = client.get("/v1/chats")
    assert listed.status_code == 200, listed.text
    return (made.json()["id"], [c["chat_id"] for c in listed.json()["items"]],
            time.monotonic() - began)


@pytest.mark.postgres
def test_reads_go_to_a_replica_that_shows_the_write(pg_store: str) -> None:
    with _serve(pg_store, pg_store) as client:  # the store itself: always current
        replicas = client.app.state.read_models.replicas  # type: ignore[attr-defined]
        chat, listed, _ = _write_then_list(client)
        assert chat in listed
        (replica,) = replicas.replicas
        for path in ("/v1/interrupts", "/v1/decisions", "/v1/decisions/stats",
                     "/v1/decisions/export?format=csv", "/v1/reviews"):
            before = replica.reads
            assert client.get(path).status_code == 200, path
            assert replica.reads > before, f"{path} read on the replica"
        before = replica.reads
        ran = client.post("/v1/reviews/queries/run", json={"query": "fast_approval"})
        assert ran.status_code == 200, ran.text
        assert replica.reads > before, "the review query read on the replica"
        assert replica.failures == 0 and replicas.behind == 0
        ready = client.get("/readyz").json()
        assert ready["status"] == "ready"
        assert ready["replicas"] == [{"name": replica.name, "up": True, "reason": None,
                                      "reads": replica.reads, "failures": 0}]


@pytest.mark.postgres
@pytest.mark.parametrize("wait", [0.3, 0.0])
def test_a_replica_behind_the_write_past_the_bound_is_not_read(pg_store: str, behind: str,
                                                                wait: float) -> None:
    with _serve(pg_store, behind, wait=wait) as client:
        replicas = client.app.state.read_models.replicas  # type: ignore[attr-defined]
        chat, listed, waited = _write_then_list(client)
        assert chat in listed  # read on the primary: the replica shows nothing
        (replica,) = replicas.replicas
        assert replica.reads == 0 and replicas.behind == 1
        # Waited up to the bound (none: at once), then read on the primary.
        assert wait <= waited < wait + (3 if wait else 0.25)


@pytest.mark.postgres
def test_a_replica_down_sends_reads_to_the_primary_and_readiness_stays(pg_store: str) -> None:
    down = f"postgresql://postgres@127.0.0.1:{_free_port()}/nothing"
    with _serve(pg_store, down) as client:
        replicas = client.app.state.read_models.replicas  # type: ignore[attr-defined]
        chat, listed, waited = _write_then_list(client)
        assert chat in listed
        (replica,) = replicas.replicas
        assert replica.reads == 0 and replica.failures == 1 and replicas.unavailable == 1
        assert waited < 0.5, "a refusing replica is not waited for"
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        (state,) = ready.json()["replicas"]
        assert state["up"] is False and "Connection refused" in state["reason"]


@pytest.mark.postgres
def test_a_replica_read_that_fails_after_the_check_is_read_on_the_primary(
        pg_store: str) -> None:
    """The replica answered its position, then fails the query (ended, restarted): the
    twin view's query reads on the primary instead, in the same request."""
    with _serve(pg_store, pg_store) as client:
        replicas = client.app.state.read_models.replicas  # type: ignore[attr-defined]
        (replica,) = replicas.replicas
        original = replica.fetch

        def failing_queries(query: bytes, params: object, *, counted: bool = True) -> object:
            if counted:  # a query, not a position: as `Replica.fetch` fails one
                raise ReplicaUnavailableError("server closed the connection unexpectedly")
            return original(query, params, counted=counted)  # type: ignore[arg-type]

        try:
            replica.fetch = failing_queries  # type: ignore[method-assign]
            chat, listed, _ = _write_then_list(client)
        finally:
            replica.fetch = original  # type: ignore[method-assign]
        assert chat in listed and replica.reads == 0


def test_without_the_setting_there_are_no_replicas(sqlite_store: str) -> None:
    with TestClient(build_app(load_settings(store=sqlite_store, agents=AGENTS)),
                    client=("127.0.0.1", 50000)) as client:
        assert client.app.state.read_models.replicas is None  # type: ignore[attr-defined]
        ready = client.get("/readyz").json()
        assert "replicas" not in ready  # as before the setting existed


def test_replicas_of_a_sqlite_store_are_refused_at_start(sqlite_store: str) -> None:
    with pytest.raises(ConfigurationError, match="standbys of a PostgreSQL store"):
        build_app(load_settings(store=sqlite_store, agents=AGENTS,
                                read_replicas="postgresql://u@r1/db"))
