"""A PostgreSQL application recorder that appends in one round trip.

The stock recorder pipelines LOCK, NOTIFY and INSERT, then commits: two round trips
and composite-type adaptation per save. Here a server-side function does the same
three steps (the table lock is kept, so notification ids still commit in order for
subscribers) and is called in autocommit with four plain arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg.sql import SQL, Identifier, Literal


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
        # Serialise concurrent start-ups: CREATE OR REPLACE FUNCTION races otherwise.
        self.sql_create_statements.insert(
            0,
            SQL("SELECT pg_advisory_xact_lock(hashtext({0}))").format(
                Literal(f"{self.datastore.schema}.{function}")
            ),
        )
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
