"""Interlock's read side: the inbox, the decision log and chat summaries, kept current."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from interlock.domain.persistence import store_env
from interlock.projections.interface import ReadModels
from interlock.projections.readmodels import SqlReadModels
from interlock.projections.registry import READ_MODELS
from interlock.projections.sql import ReadModel

if TYPE_CHECKING:
    from interlock.domain import Interlock

__all__ = ["READ_MODELS", "ReadModel", "ReadModels", "SqlReadModels", "open_read_models",
           "open_views"]


def open_views(
    app: Interlock, store: str, *, read_models: Iterable[ReadModel] = READ_MODELS
) -> SqlReadModels:
    """The views of `app`'s store (created if missing), not yet kept current."""
    scheme = urlsplit(store).scheme
    if scheme in ("postgresql", "postgres"):
        from interlock.projections.postgres import postgres_views

        datastore = app.recorder.datastore  # type: ignore[attr-defined]
        return SqlReadModels(app, postgres_views(datastore, app.name, read_models))
    from interlock.projections.sqlite import SQLiteDb, sqlite_views

    path = ":memory:" if scheme == "memory" else store_env(store)["SQLITE_DBNAME"]
    db = SQLiteDb(path)
    return SqlReadModels(app, sqlite_views(db, app.name, read_models), on_close=db.close)


def open_read_models(
    app: Interlock, store: str, *, run: bool = True, poll_interval: float = 0.5,
    read_models: Iterable[ReadModel] = READ_MODELS,
) -> SqlReadModels:
    """The read side of `app`, kept current by a thread of this process unless `run=False`.

    `wait(position)` blocks until every view has applied the event at `position`
    (the value `Interlock.commit()` and `TurnResult.position` return).
    """
    models = open_views(app, store, read_models=read_models)
    if run:
        models.start(poll_interval)
    return models
