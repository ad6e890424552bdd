"""The decision log's `policy` column (the data policy version a call was held under): a view
made at an earlier version (before the column) is rebuilt when opened rather than left failing
its INSERTs."""

from __future__ import annotations

from interlock.bootstrap import build_service
from interlock.projections import open_views
from interlock.projections.engine.sql import VERSION_KEY
from interlock.projections.views.decisions import DecisionsView


def test_a_decisions_view_made_before_the_policy_column_is_rebuilt(sqlite_store: str) -> None:
    app = build_service(sqlite_store, [])
    models = open_views(app)
    try:
        models.catch_up()
        view = models.view(DecisionsView)
        position = view.position()
        with view.batch(position, position):  # the shape of version 2: before data policies
            view._run("ALTER TABLE {decisions} DROP COLUMN policy", {})
            view._run("UPDATE {tracking} SET notification_id = 2"
                      " WHERE application_name = %(k)s", {"k": VERSION_KEY})
    finally:
        models.close()
    models = open_views(app)
    try:
        view = models.view(DecisionsView)
        assert view.store.max_tracking_id(VERSION_KEY) == DecisionsView.version == 3
        assert view._fetch("SELECT policy FROM {decisions}", {}) == []
    finally:
        models.close()
        app.close()
