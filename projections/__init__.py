"""Interlock's read side: the inbox, the decision log and chat summaries, kept current."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from interlock.domain.persistence import store_env
from interlock.projections.interface import ReadModels
from interlock.projections.readmodels import SqlReadModels, Views

if TYPE_CHECKING:
    from interlock.domain import Interlock

__all__ = ["ReadModels", "SqlReadModels", "open_read_models", "open_views"]


def open_views(app: Interlock, store: str) -> SqlReadModels:
    """The views of `app`'s store (created if missing), not yet kept current."""
    scheme = urlsplit(store).scheme
    if scheme in ("postgresql", "postgres"):
        from interlock.projections.postgres import postgres_views

        views: Views = postgres_views(app.recorder.datastore, app.name)  # type: ignore[attr-defined]
        return SqlReadModels(app, views)
    from interlock.projections.sqlite import SQLiteDb, sqlite_views

    path = ":memory:" if scheme == "memory" else store_env(store)["SQLITE_DBNAME"]
    db = SQLiteDb(path)
    return SqlReadModels(app, sqlite_views(db, app.name), on_close=db.close)


def open_read_models(
    app: Interlock, store: str, *, run: bool = True, poll_interval: float = 0.5
) -> SqlReadModels:
    """The read side of `app`, kept current by a thread of this process unless `run=False`.

    `wait(position)` blocks until every view has applied the event at `position`
    (the value `Interlock.commit()` and `TurnResult.position` return).
    """
    models = open_views(app, store)
    if run:
        models.start(poll_interval)
    return models
