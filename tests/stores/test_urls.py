"""Store URLs are read as libpq reads them, or refused naming the part it cannot take: none is
silently read as another database (issue 47)."""

from __future__ import annotations

import socket

import pytest
from psycopg.conninfo import conninfo_to_dict

from interlock.bootstrap import build_service
from interlock.domain.errors import ConfigurationError
from interlock.stores.urls import STORE_CONNINFO, redacted, store_env
from tests.conftest import PG_URL
from tests.kit import make_app


def _read(url: str) -> dict[str, str]:
    """What the store's connections will be made from."""
    return {k: str(v) for k, v in conninfo_to_dict(store_env(url)[STORE_CONNINFO]).items()}


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write",
     {"user": "u", "host": "h1,h2", "port": "5432,5433", "dbname": "db",
      "target_session_attrs": "read-write"}),
    ("postgresql://u@/db?host=h1,h2&port=5432,5433",
     {"user": "u", "host": "h1,h2", "port": "5432,5433", "dbname": "db"}),
    ("postgres://a:s%40c@[::1]:5433/d?sslmode=require&connect_timeout=4",
     {"user": "a", "password": "s@c", "host": "::1", "port": "5433", "dbname": "d",
      "sslmode": "require", "connect_timeout": "4"}),
    ("postgresql://%2Fvar%2Frun%2Fpostgresql/d", {"host": "/var/run/postgresql", "dbname": "d"}),
    ("postgresql://h/d?dbname=other", {"host": "h", "dbname": "other"}),
    ("postgresql:///d", {"dbname": "d"}),  # no host: libpq's (PGHOST, its socket), not ours
    ("postgresql://h/d?schema=s&application_name=a%26b&pool_size=2",
     {"host": "h", "dbname": "d", "application_name": "a&b"}),
])
def test_every_form_libpq_accepts_means_what_it_means_to_libpq(
        url: str, expected: dict[str, str]) -> None:
    assert _read(url) == expected


def test_interlock_s_own_parameters_are_taken_out_before_libpq_reads_the_rest() -> None:
    env = store_env("postgresql://h/d?pool_size=2&target_session_attrs=primary&schema=t%5Fa"
                    "&max_overflow=0")
    assert (env["POSTGRES_SCHEMA"], env["POSTGRES_POOL_SIZE"], env["POSTGRES_MAX_OVERFLOW"]) \
        == ("t_a", "2", "0")
    assert _read("postgresql://h/d?pool_size=2&target_session_attrs=primary") == {
        "host": "h", "dbname": "d", "target_session_attrs": "primary"}


@pytest.mark.parametrize(("url", "named"), [
    ("postgresql://h/d?colour=blue", 'invalid URI query parameter: "colour"'),
    ("postgresql://h:abc/d", "port 'abc' is not a port number"),
    ("postgresql://u@h1:p1,h2:p2/db?target_session_attrs=read-write", "port 'p1'"),
    ("postgresql://u@/db?host=h1,h2,h3&port=1,2", "2 ports for 3 hosts"),
    ("postgresql://h/d?target_session_attrs=standby", "target_session_attrs=standby"),
    ("postgresql://h/d?target_session_attrs=read-only", "target_session_attrs=read-only"),
    ("postgresql://h/d?replication=database", "replication=database"),
    ("postgresql://h/d?pool_size=many", "pool_size='many'"),
    ("postgresql://h/d?schema=", "schema="),
])
def test_what_libpq_or_the_store_cannot_take_is_refused_naming_the_part(
        url: str, named: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        store_env(url)
    assert named in str(refused.value)


def test_refusals_never_show_the_password() -> None:
    with pytest.raises(ConfigurationError) as refused:
        store_env("postgresql://u:hunter2@h/d?colour=blue&password=hunter3")
    assert "hunter" not in str(refused.value) and "u:***@h" in str(refused.value)
    assert redacted("postgresql://u:p@h1,h2/d?password=x&a=b") == \
        "postgresql://u:***@h1,h2/d?password=***&a=b"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _suite(**given: str) -> dict[str, str]:
    return {k: str(v) for k, v in {**conninfo_to_dict(PG_URL), **given}.items()}


@pytest.mark.postgres
def test_a_port_given_as_a_parameter_is_the_one_connected_to() -> None:
    """`?host=..&port=..` once read as 127.0.0.1:5432, the suite's server: here the port
    named, which nothing listens on, is tried and refused."""
    where = _suite()
    closed = _closed_port()
    url = f"postgresql://{where['user']}@/{where['dbname']}?host=127.0.0.1&port={closed}"
    with pytest.raises(ConfigurationError) as refused:
        build_service(url)
    assert str(closed) in str(refused.value) and "refused" in str(refused.value)


@pytest.mark.postgres
@pytest.mark.parametrize("form", ["authority", "parameters"])
def test_a_multi_host_url_reaches_the_first_host_that_takes_writes(
        form: str, pg_store: str) -> None:
    where = _suite()
    schema = pg_store.rpartition("schema=")[2]
    closed, port = _closed_port(), where.get("port", "5432")
    hosts = f"127.0.0.1:{closed},127.0.0.1:{port}"
    url = (f"postgresql://{where['user']}@{hosts}/{where['dbname']}?" if form == "authority"
           else f"postgresql://{where['user']}@/{where['dbname']}?host=127.0.0.1,127.0.0.1"
                f"&port={closed},{port}&")
    service, _, _ = make_app(url + f"target_session_attrs=read-write&schema={schema}", [])
    try:
        chat = service.start_chat("ops", actor="alice")
        assert service.get_chat(chat.id).version == 1
    finally:
        service.close()
