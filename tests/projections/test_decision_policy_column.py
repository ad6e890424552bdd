"""The decision log's `policy` column (the data policy version a call was held under): a view
made before it is rebuilt on setup rather than left failing its INSERTs."""

from __future__ import annotations

from interlock.bootstrap import build_service
from interlock.projections import open_views
from interlock.projections.views.decisions import DecisionsView


def test_a_decisions_view_made_before_the_policy_column_is_rebuilt(sqlite_store: str) -> None:
    app = build_service(sqlite_store, [])
    models = open_views(app)
    try:
        models.catch_up()
        view = models.view(DecisionsView)
        position = view.position()
        with view.batch(position, position):  # the shape of a view before data policies
            view._run("ALTER TABLE {decisions} DROP COLUMN policy", {})
        assert view._predates_policies()
        view.setup()
        assert not view._predates_policies()
        assert view._fetch("SELECT policy FROM {decisions}", {}) == []
    finally:
        models.close()
        app.close()
