"""The store's statements sent straight through libpq: prepared once a connection, again
when PostgreSQL forgot them, failing with psycopg's named errors, never inside a
transaction (they commit on their own)."""

from __future__ import annotations

import psycopg
import pytest

from interlock.stores import libpq
from tests.conftest import PG_URL

pytestmark = pytest.mark.postgres

QUERY = b"SELECT $1::int8 * 2, $2::text"
NAME = libpq.name_of(QUERY).decode()


def _doubled(conn: psycopg.Connection[object], n: int) -> tuple[int, str]:
    result = libpq.run(conn, QUERY, [b"%d" % n, "é".encode()], [20, 25])
    return int(result.get_value(0, 0) or b""), (result.get_value(0, 1) or b"").decode()


def _prepared(conn: psycopg.Connection[object]) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM pg_prepared_statements").fetchall()]


def test_a_statement_is_prepared_once_and_prepared_again_once_forgotten() -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        assert _doubled(conn, 21) == (42, "é")
        assert _doubled(conn, -4) == (-8, "é")
        assert _prepared(conn) == [NAME]
        conn.execute("DEALLOCATE ALL")
        assert _doubled(conn, 5) == (10, "é")
        assert _prepared(conn) == [NAME]


def test_a_failing_statement_raises_the_named_error_and_leaves_the_connection_usable() -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            libpq.run(conn, QUERY, [b"%d" % 2**62, b"x"], [20, 25])
        assert _doubled(conn, 1) == (2, "é")
        with pytest.raises(psycopg.errors.UndefinedTable):
            libpq.run(conn, b"SELECT * FROM no_such_table", [], [])
        assert _doubled(conn, 3) == (6, "é")


def test_a_direct_statement_is_refused_inside_a_transaction() -> None:
    with psycopg.connect(PG_URL) as conn:
        conn.execute("SELECT 1")  # psycopg opened a transaction
        with pytest.raises(psycopg.ProgrammingError, match="idle connection"):
            _doubled(conn, 1)


def test_a_statement_prepared_on_the_server_but_not_known_here_is_used() -> None:
    """A prepare interrupted after it was sent (Ctrl-C) leaves the name on the server only:
    preparing it again is refused, and the name (a hash of the text) is used as it is."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(b"PREPARE " + NAME.encode() + b" AS " + QUERY)
        assert _doubled(conn, 7) == (14, "é")
        assert _doubled(conn, 8) == (16, "é")


def test_a_closed_connection_is_an_operational_error_as_psycopg_says() -> None:
    conn = psycopg.connect(PG_URL, autocommit=True)
    conn.close()
    with pytest.raises(psycopg.OperationalError, match="closed"):
        _doubled(conn, 1)
