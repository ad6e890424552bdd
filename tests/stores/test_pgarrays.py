"""The append's flat arrays, packed by hand, read back by PostgreSQL as what was sent."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from interlock.stores.pgarrays import Blobs, Int4s, Int8s, Texts, Uuids
from tests.conftest import PG_URL

IDS = [uuid.uuid4(), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)]
CASES = [
    (Uuids(IDS), "uuid[]", IDS),
    (Texts(["a", "", "ünïcødé ✓", "x" * 5000]), "text[]", ["a", "", "ünïcødé ✓", "x" * 5000]),
    (Blobs([b"", b"\x00\xff", bytes(range(256))]), "bytea[]",
     [b"", b"\x00\xff", bytes(range(256))]),
    (Int8s([0, -1, 2**63 - 1, -(2**63)]), "bigint[]", [0, -1, 2**63 - 1, -(2**63)]),
    (Int4s([0, -7, 2**31 - 1]), "int[]", [0, -7, 2**31 - 1]),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("sent", "cast", "expected"), CASES + [
    (type(sent)(), cast, []) for sent, cast, _ in CASES])
def test_postgresql_reads_back_what_was_packed(sent: list[object], cast: str,
                                               expected: list[object]) -> None:
    with psycopg.connect(PG_URL) as conn:
        (got, typed, length), = conn.execute(
            f"SELECT %b, pg_typeof(%b)::text = %s, cardinality(%b::{cast})",
            (sent, sent, "integer[]" if cast == "int[]" else cast, sent)).fetchall()
    got = [bytes(b) for b in got] if cast == "bytea[]" else got
    assert got == expected and typed and length == len(expected)
