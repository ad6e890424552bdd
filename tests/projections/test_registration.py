"""A read model is one module and one registration: the shared machinery does the rest."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection

from interlock.domain import Interlock
from interlock.domain.chat.events import ModelResponded, ToolRequested, requested_calls
from interlock.projections import READ_MODELS, open_views
from interlock.projections.engine.sql import ReadModel, SqlView
from tests.projections.flows import seed

pytestmark = pytest.mark.anyio


class ToolTallyView(SqlView):
    """How often each tool was requested: a read model known only to this test."""

    view_name = "tool_tally"
    tables = ("tool_tally",)
    ddl = ("CREATE TABLE IF NOT EXISTS {tool_tally} (tool text PRIMARY KEY,"
           " requests bigint NOT NULL)",)
    dump_sql = "SELECT tool, requests FROM {tool_tally} ORDER BY tool"

    def requested(self, tool: str) -> None:
        self._run("INSERT INTO {tool_tally} VALUES (%(t)s, 1) ON CONFLICT (tool)"
                  " DO UPDATE SET requests = {tool_tally}.requests + 1", {"t": tool})


class ToolTallyProjection(Projection[ToolTallyView]):
    name = "tool_tally"
    topics = (ToolRequested.TOPIC,)

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Only tool requests count."""

    @process_event.register
    def _requested(self, e: ToolRequested, tracking: Tracking) -> None:
        self.view.requested(e.name)


TALLY = ReadModel(ToolTallyView, ToolTallyProjection)


def requests_in_log(app: Interlock) -> list[dict[str, object]]:
    """The tally read straight from the notification log, without any projection."""
    notes = app.recorder.select_notifications(
        0, 10_000, topics=[ToolRequested.TOPIC, ModelResponded.TOPIC])
    events = requested_calls(app.mapper.to_domain_event(n) for n in notes)
    counts = Counter(e.name for e in events if isinstance(e, ToolRequested))
    return [{"tool": tool, "requests": n} for tool, n in sorted(counts.items())]


async def test_a_registered_read_model_is_created_caught_up_and_rebuilt(
    app: Interlock, store: str
) -> None:
    models = open_views(app, read_models=(*READ_MODELS, TALLY))
    try:
        tally = models.view(ToolTallyView)
        assert (tally.dump(), tally.position()) == ([], 0)  # its table exists, empty
        await seed(app)
        head = app.recorder.max_notification_id() or 0
        assert models.catch_up() == head
        assert tally.dump() == requests_in_log(app) != []
        assert models.positions()["tool_tally"] == head
        with tally.batch(head, head):  # a stray row only a rebuild removes
            tally.requested("stray")
        assert models.runner("tool_tally").rebuild() == head
        assert tally.dump() == requests_in_log(app)
    finally:
        models.close()


async def test_an_unregistered_read_model_is_not_kept(app: Interlock, store: str) -> None:
    models = open_views(app)
    try:
        assert [r.name for r in models.runners] == [m.name for m in READ_MODELS]
        with pytest.raises(LookupError, match="ToolTallyView"):
            models.view(ToolTallyView)
    finally:
        models.close()
