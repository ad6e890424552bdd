"""Interlock's read side: the inbox, the decision log and chat summaries, kept current.

The read side's wiring: it hands the registered views (`views.registry.READ_MODELS`) to
the engine, which knows none of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from eventsourcing.sqlite import SQLiteFactory

from interlock.projections.backends.postgres import ViewLeader, postgres_views
from interlock.projections.backends.sqlite import SQLiteDb, sqlite_views
from interlock.projections.engine.sql import ReadModel
from interlock.projections.interface import ReadModels
from interlock.projections.readmodels import SqlReadModels
from interlock.projections.views.registry import READ_MODELS

if TYPE_CHECKING:
    from interlock.domain import Interlock

__all__ = ["READ_MODELS", "ReadModel", "ReadModels", "SqlReadModels", "open_read_models",
           "open_views"]


def open_views(
    app: Interlock, *, read_models: Iterable[ReadModel] = READ_MODELS, prefix: str | None = None,
) -> SqlReadModels:
    """The views in `app`'s own store (created if missing), not yet kept current.

    The store is the one the app was built on: PostgreSQL views share its datastore,
    SQLite views its file, and an in-memory app gets in-memory views. `prefix` names tables
    of their own (the app's name by default), such as a rebuild beside the live views.
    """
    if isinstance(app.factory, PostgresFactory):
        views = postgres_views(app.factory.datastore, app.name, read_models, prefix=prefix)
        recorder = app.recorder
        leader = (ViewLeader(recorder, prefix or app.name)
                  if isinstance(recorder, PostgresApplicationRecorder) else None)
        return SqlReadModels(app, views, leader=leader)
    path = ":memory:"
    if isinstance(app.factory, SQLiteFactory):
        path = app.factory.env.get(SQLiteFactory.SQLITE_DBNAME) or path
    db = SQLiteDb(path)
    return SqlReadModels(app, sqlite_views(db, app.name, read_models, prefix=prefix),
                         on_close=db.close)


def open_read_models(
    app: Interlock,
    *,
    run: bool = True,
    poll_interval: float = 0.5,
    read_models: Iterable[ReadModel] = READ_MODELS,
) -> SqlReadModels:
    """The read side of `app`, kept current by a thread of this process unless `run=False`.

    `wait(position)` blocks until every view has applied the event at `position`
    (the value `Interlock.commit()` and `TurnResult.position` return).
    """
    models = open_views(app, read_models=read_models)
    if run:
        models.start(poll_interval)
    return models
