"""A store that answers but cannot be written (a standby, a demoted primary, read-only
sessions) is unavailable: 503 `store_unavailable` with Retry-After, `/readyz` says why, never a
500; its sessions are dropped, and the service serves again by itself once it is writable
(issue 47). The read-only server here is a role whose sessions are read-only
(`default_transaction_read_only`), as every session of a hot standby is."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.sql import SQL, Identifier

from interlock.bootstrap import build_app, build_service
from interlock.domain.errors import ConfigurationError
from interlock.settings import load_settings
from interlock.stores.guard import StoreGuard
from tests.api.server import ThreadServer
from tests.conftest import PG_URL

pytestmark = pytest.mark.postgres

DEADLINE = 1.0


@pytest.fixture
def role(pg_store: str) -> Iterator[str]:
    """A login role of its own; its store URL (in pg_store's schema)."""
    name = f"ro_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(SQL("CREATE ROLE {} LOGIN SUPERUSER").format(Identifier(name)))
    where = {**conninfo_to_dict(PG_URL), "user": name}
    url = (f"postgresql://{name}@{where.get('host', '127.0.0.1')}:{where.get('port', 5432)}/"
           f"{where['dbname']}?{pg_store.rpartition('?')[2]}")
    try:
        yield url
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                         " WHERE usename = %s", (name,))
            conn.execute(SQL("DROP OWNED BY {}").format(Identifier(name)))
            conn.execute(SQL("DROP ROLE {}").format(Identifier(name)))


def _read_only(url: str, on: bool, *, end_sessions: bool) -> None:
    """Make the role's new sessions read-only (or not); end its sessions, as a restarted
    node's end, when asked."""
    user = conninfo_to_dict(url.partition("?")[0])["user"]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        setting = "SET default_transaction_read_only = on" if on else \
            "RESET default_transaction_read_only"
        conn.execute(SQL("ALTER ROLE {} " + setting).format(Identifier(str(user))))
        if end_sessions:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                         " WHERE usename = %s", (user,))


def _read_only_session(timeout: float) -> psycopg.Connection[Any]:
    params = {**conninfo_to_dict(PG_URL), "options": "-c default_transaction_read_only=on"}
    return psycopg.connect(make_conninfo(**params), autocommit=True, connect_timeout=2)


def test_the_probe_calls_a_read_only_store_down_and_says_why() -> None:
    guard = StoreGuard(_read_only_session, deadline=DEADLINE)
    guard.probe()
    assert not guard.up and guard.read_only
    assert guard.reason.startswith("the store is read-only") and \
        "default_transaction_read_only" in guard.reason
    with pytest.raises(ConfigurationError, match="read-only"):
        guard.first_contact()


def test_a_read_only_store_at_start_is_refused_naming_it(role: str) -> None:
    _read_only(role, True, end_sessions=False)
    with pytest.raises(ConfigurationError, match="cannot use the PostgreSQL store: the store"
                                                 " is read-only"):
        build_service(role)


def _cycle(http: httpx.Client) -> httpx.Response:
    made = http.post("/v1/chats", json={"agent": "payer"})
    if made.status_code != 201:
        return made
    return http.post(f"/v1/chats/{made.json()['id']}/messages", json={"text": "pay"})


def _until(check: Any, timeout: float, what: str) -> Any:
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if found := check():
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what} not within {timeout}s")


def test_a_store_turned_read_only_answers_503_and_serves_again_by_itself(role: str) -> None:
    settings = load_settings(store=role, agents="tests.faults.agents:AGENTS",
                             store_deadline=DEADLINE)
    server = ThreadServer(build_app(settings))
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert _cycle(http).status_code == 200
            _read_only(role, True, end_sessions=True)  # the node came back as a standby
            answers = [_cycle(http) for _ in range(20)]
            assert {(a.status_code, a.json()["error"]["code"], a.headers.get("retry-after"))
                    for a in answers} == {(503, "store_unavailable", "1")}
            # the first reason may be the ended session's; the next probe finds a standby
            ready = _until(lambda: (r := http.get("/readyz")).status_code == 503 and "read-only"
                           in (r.json()["store_reason"] or "") and r, 10, "readyz saying why")
            assert ready.json()["store"] is False

            _read_only(role, False, end_sessions=False)  # promoted: its old sessions stay
            _until(lambda: http.get("/readyz").status_code == 200, 10, "ready again")
            assert _until(lambda: _cycle(http).status_code == 200, 10, "cycles again")
            assert all(_cycle(http).status_code == 200 for _ in range(10))
    finally:
        server.stop()
