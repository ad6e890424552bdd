"""The store lends a pooled connection as the library did: errors turned into the library's,
a connection closed by its user given back quietly, and none left counted in use."""

from __future__ import annotations

import pytest
from eventsourcing.persistence import IntegrityError, ProgrammingError

from interlock.bootstrap import build_service
from interlock.stores.postgres import GuardedDatastore

pytestmark = pytest.mark.postgres


def test_lent_connections_map_errors_and_are_always_given_back(pg_store: str) -> None:
    app = build_service(pg_store)
    store = app.recorder.datastore
    assert isinstance(store, GuardedDatastore)
    with store.get_connection() as conn:
        conn.close()  # its user closed it: given back without an error, as before
    with pytest.raises(ProgrammingError), store.get_connection() as conn:
        conn.execute("SELECT * FROM no_such_table")
    with pytest.raises(IntegrityError), store.get_connection() as conn:
        conn.execute("CREATE TEMP TABLE t (x int PRIMARY KEY)")
        conn.execute("INSERT INTO t VALUES (1), (1)")
    with store.get_connection() as conn:
        assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    assert not store._in_use
    app.close()
