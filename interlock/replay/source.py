"""The recorded store, opened to be read only: which chats to replay, and their events.

Nothing here writes: the store is opened without creating tables, without the snapshot
store (a refused snapshot would be deleted), read-only (SQLite `mode=ro`, PostgreSQL
`default_transaction_read_only` once the key store is open), and only SELECTs are issued.
The key store is opened where its table exists, so encrypted fields read as recorded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.postgres import ConnectionPool, PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder

from interlock.domain.application import Interlock
from interlock.domain.chat.events import ChatEvent, ChatStarted
from interlock.domain.errors import ChatNotFoundError, ConfigurationError
from interlock.domain.storage.keys import Keyring
from interlock.stores.erasure_keys import KeyStore
from interlock.stores.urls import store_env

PAGE = 500  # notifications read at a time, chats loaded together


@dataclass(frozen=True)
class Selection:
    """Which recorded chats: these ids, this agent's, started in [since, until), at most N."""

    chats: Sequence[UUID] = ()
    agent: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None

    def admits(self, started: ChatStarted) -> bool:
        at = started.timestamp
        return ((self.agent is None or started.agent == self.agent)
                and (self.since is None or at >= self.since)
                and (self.until is None or at < self.until))


def open_recorded(url: str, secret: bytes | Keyring | None = None) -> Interlock:
    """The store `url` names, for reading its chats only."""
    env = {**store_env(url), "CREATE_TABLE": "n"}
    if env.get("SQLITE_DBNAME"):
        if not Path(env["SQLITE_DBNAME"]).is_file():
            raise ConfigurationError(f"no recorded store at {url}: the file does not exist")
        env["SQLITE_DBNAME"] = f"file:{env['SQLITE_DBNAME']}?mode=ro"
    service = Interlock([], env=env, secret=secret, io_threads=1)
    if _has_keys(service):  # else no chat was ever encrypted (and nothing must be created)
        service.protect_personal_data(KeyStore.open(service))
    if isinstance(service.recorder, PostgresApplicationRecorder):
        _read_only(service.recorder.datastore)
    return service


def _read_only(datastore: PostgresDatastore) -> None:
    """From now on every connection is read-only (`default_transaction_read_only`): the
    key store's CREATE TABLE IF NOT EXISTS above is the last statement that could write."""
    before = datastore.pool
    kwargs: dict[str, Any] = dict(before.kwargs) if isinstance(before.kwargs, dict) else {}
    datastore.pool = ConnectionPool(
        connection_class=before.connection_class,
        kwargs={**kwargs, "options": "-c default_transaction_read_only=on"},
        min_size=1, max_size=2, open=False, configure=datastore.after_connect_func(),
        timeout=before.timeout)
    before.close()


def _has_keys(app: Interlock) -> bool:
    """Whether the store has the personal-data key table (interlock/stores/erasure_keys.py)."""
    recorder = app.recorder
    if isinstance(recorder, PostgresApplicationRecorder):
        datastore = recorder.datastore
        with datastore.get_connection() as conn:
            row = conn.execute("SELECT to_regclass(%s) AS t",
                               (f"{datastore.schema}.interlock_erasure_keys",)).fetchone()
        return row is not None and row["t"] is not None
    if isinstance(recorder, SQLiteApplicationRecorder):
        with recorder.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                         "name = 'erasure_keys'")
            return curs.fetchone() is not None
    return False


def started_chats(app: Interlock, selection: Selection) -> Iterator[ChatStarted]:
    """The ChatStarted event of each selected chat, oldest first."""
    if selection.chats:
        yield from _named(app, selection)
        return
    count, start = 0, 1
    while True:
        page = app.recorder.select_notifications(start, PAGE, topics=[ChatStarted.TOPIC])
        for notification in page:
            started = app.mapper.to_domain_event(notification)
            if isinstance(started, ChatStarted) and selection.admits(started):
                if selection.limit is not None and count >= selection.limit:
                    return
                count += 1
                yield started
        if len(page) < PAGE:
            return
        start = page[-1].id + 1


def _named(app: Interlock, selection: Selection) -> Iterator[ChatStarted]:
    for chat_id in selection.chats[:selection.limit]:
        first = list(app.events.get(chat_id, lte=1))
        if not first or not isinstance(first[0], ChatStarted):
            raise ChatNotFoundError(chat_id)
        yield first[0]


def events_of(app: Interlock, chat_ids: Sequence[UUID]) -> dict[UUID, list[ChatEvent]]:
    """Every event of these chats (one query on PostgreSQL), each chat's oldest first."""
    if app.mapper.personal is not None:
        app.mapper.personal.warm(chat_ids)  # their keys in one query, not one each
    many: Any = getattr(app.recorder, "select_events_of", None)
    if many is None:
        return {c: list(app.chat_events(c)) for c in chat_ids}
    to_event = app.mapper.to_domain_event
    return {c: [to_event(s) for s in stored] for c, stored in many(chat_ids).items()}


def pages(app: Interlock, selection: Selection, size: int = PAGE
          ) -> Iterator[list[list[ChatEvent]]]:
    """The selected chats' events, a page of chats at a time (memory stays flat)."""
    batch: list[UUID] = []
    for started in started_chats(app, selection):
        batch.append(started.originator_id)
        if len(batch) >= size:
            yield _page(app, batch)
            batch = []
    if batch:
        yield _page(app, batch)


def _page(app: Interlock, batch: list[UUID]) -> list[list[ChatEvent]]:
    found = events_of(app, batch)
    return [found[c] for c in batch if c in found]
