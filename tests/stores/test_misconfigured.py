"""A PostgreSQL store named wrongly is refused at start in PostgreSQL's own words (exit 2);
only a store that answered and then stopped is an outage (503, retry shortly)."""

from __future__ import annotations

import os
import socket
import uuid
from unittest import mock

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from interlock.bootstrap import build_service
from interlock.cli.main import main as cli
from interlock.domain.errors import ConfigurationError, StoreUnavailableError
from interlock.stores.guard import StoreGuard
from tests.conftest import PG_URL

pytestmark = pytest.mark.postgres


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _where(**changed: object) -> str:
    """The suite's store URL with `changed` parts (database, user, port)."""
    where = {**conninfo_to_dict(PG_URL), **changed}
    host = where.get("host", "127.0.0.1")
    return f"postgresql://{where.get('user', 'postgres')}@{host}:{where.get('port', 5432)}/" \
           f"{where['dbname']}"


MISTAKES = {
    "database": ({"dbname": f"nodb_{uuid.uuid4().hex[:8]}"}, "does not exist"),
    "role": ({"user": f"norole_{uuid.uuid4().hex[:8]}"}, "does not exist"),
    "port": ({"port": _closed_port()}, "Connection refused"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_wrong_store_is_a_configuration_error_in_postgresqls_words(mistake: str) -> None:
    changed, said = MISTAKES[mistake]
    with pytest.raises(ConfigurationError) as refused:
        build_service(_where(**changed))
    assert "cannot use the PostgreSQL store" in str(refused.value)
    assert said in str(refused.value) and str(next(iter(changed.values()))) in str(refused.value)
    assert "retry shortly" not in str(refused.value)


@pytest.mark.parametrize("command", [["verify", "--all"], ["serve", "--port", "0"]])
def test_serve_and_verify_exit_2_naming_the_missing_database(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"nodb_{uuid.uuid4().hex[:8]}"
    with mock.patch.dict(os.environ):  # `serve` exports its settings for its workers
        assert cli([*command, "--store", _where(dbname=missing)]) == 2
    err = capsys.readouterr().err
    assert f'database "{missing}" does not exist' in err and "unavailable" not in err


def test_an_outage_after_start_stays_a_503_and_says_why() -> None:
    def refused(timeout: float) -> psycopg.Connection[object]:
        raise psycopg.OperationalError("connection failed: FATAL: the database system is"
                                       " shutting down")

    guard = StoreGuard(refused, deadline=1)
    guard.probe()
    with pytest.raises(StoreUnavailableError) as down:
        guard.admit()
    assert down.value.status == 503 and "retry shortly" in str(down.value)
    assert "the database system is shutting down" in str(down.value)
