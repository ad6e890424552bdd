"""A PostgreSQL application recorder that appends in one round trip.

The stock recorder pipelines LOCK, NOTIFY and INSERT, then commits: two round trips
and composite-type adaptation per save. Here a server-side function does the same
three steps (the table lock is kept, so notification ids still commit in order for
subscribers) and is called in autocommit with four plain arrays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InterfaceError,
    OperationalError,
    StoredEvent,
)
from eventsourcing.postgres import (
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresFactory,
    TPostgresTrackingRecorder,
)
from eventsourcing.utils import retry
from psycopg.sql import SQL, Identifier


class InterlockPostgresRecorder(PostgresApplicationRecorder):
    """Appends events with one call to `<table>_append(ids, versions, topics, states)`."""

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        function = f"{events_table_name}_append"
        self.check_identifier_length(function)
        names = {
            "schema": Identifier(self.datastore.schema),
            "table": Identifier(self.events_table_name),
            "fn": Identifier(function),
            "channel": Identifier(self.channel_name),
            "id_type": Identifier(self.datastore.originator_id_type),
        }
        self.sql_create_statements.append(
            SQL(
                "CREATE OR REPLACE FUNCTION {schema}.{fn}("
                "ids {id_type}[], versions bigint[], topics text[], states bytea[]) "
                "RETURNS SETOF bigint LANGUAGE plpgsql AS $$ BEGIN "
                "LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE; "
                "NOTIFY {channel}; "
                "RETURN QUERY INSERT INTO {schema}.{table} "
                "(originator_id, originator_version, topic, state) "
                "SELECT * FROM unnest(ids, versions, topics, states) RETURNING notification_id; "
                "END $$"
            ).format(**names)
        )
        self.append_statement = SQL("SELECT * FROM {schema}.{fn}(%s, %s, %s, %s)").format(**names)

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int]:
        if not stored_events:
            return []
        params = (
            [e.originator_id for e in stored_events],
            [e.originator_version for e in stored_events],
            [e.topic for e in stored_events],
            [e.state for e in stored_events],
        )
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self.append_statement, params, prepare=True)
            return [row[next(iter(row))] for row in curs.fetchall()]


@contextmanager
def schema_lock(datastore: PostgresDatastore) -> Iterator[None]:
    """Hold a session advisory lock while tables, types and functions are created.

    Processes starting together on a fresh schema otherwise race on CREATE TYPE and
    CREATE TABLE (a unique violation in pg_type) and on CREATE OR REPLACE FUNCTION.
    """
    key = f"interlock-ddl:{datastore.schema}"
    with datastore.get_connection() as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))


class InterlockPostgresFactory(PostgresFactory):
    """The library's factory with the one-round-trip recorder and serialised DDL."""

    application_recorder_class = InterlockPostgresRecorder

    def application_recorder(self) -> ApplicationRecorder:
        with schema_lock(self.datastore):
            return super().application_recorder()

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        with schema_lock(self.datastore):
            return super().aggregate_recorder(purpose)

    def tracking_recorder(
        self, tracking_recorder_class: type[TPostgresTrackingRecorder] | None = None
    ) -> TPostgresTrackingRecorder:
        with schema_lock(self.datastore):
            return super().tracking_recorder(tracking_recorder_class)
