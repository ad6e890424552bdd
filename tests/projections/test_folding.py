"""Rows held during a batch (engine/fold.py) are written as the events one at a time would
write them: every table of every view, private ones included, whatever the batches are."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.domain import Interlock, RespondEntry
from interlock.projections import SqlReadModels, open_views
from interlock.projections.engine.sql import SqlView
from interlock.projections.views.decisions import DecisionsView
from tests.projections.flows import seed

pytestmark = pytest.mark.anyio


def _tables(view: SqlView) -> dict[str, list[str]]:
    """Every row of every table of the view (the legacy webhook table aside), sorted."""
    rows = {}
    for table in view.tables:
        if table.endswith("_idx") or table == "webhook_subs":
            continue
        found = view._fetch(f"SELECT * FROM {{{table}}}", {})
        rows[table] = sorted(repr(sorted(dict(r).items())) for r in found)
    return rows


def _everything(models: SqlReadModels) -> dict[str, Any]:
    return {r.name: _tables(r.view) for r in models.runners}


async def _turns(app: Interlock) -> None:
    """A chat whose calls and turns follow one another: a turn of one actor, its approval,
    the call it runs (no interrupt), then another actor's turn and an approval of it; and
    chats started and sent to at once (a first turn folds into its chat's rows), one of
    them between the first chat's turns, its calls held while that chat's turn changes."""
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
    for actor, approver in (("alice", "bob"), ("carol", "dave")):
        sent = await app.send(chat.id, "transfer $50 to savings", actor=actor)
        between = app.start_chat("bankingAgent", actor="gina", tenant="bank")
        await app.send(between.id, f"transfer $5 to {actor}", actor="hank")
        await app.resume(chat.id, actor=approver, respond=[RespondEntry(
            ref=sent.interrupts[0].ref, name="userApproval", output={"approved": True})])
    other = app.start_chat("bankingAgent", actor="erin", tenant="bank")
    await app.send(other.id, "transfer $20 to dave", actor="frank")


@pytest.mark.parametrize("size", [1, 3])
async def test_one_batch_writes_every_table_as_small_batches_do(
    app: Interlock, views: SqlReadModels, size: int
) -> None:
    """The whole log in one batch (sends, resumes, restarts and the next turns together)
    against batches of `size` events: the same rows in every table of every view."""
    await seed(app)
    await _turns(app)
    for runner in views.runners:
        runner.batch_size = size
    views.catch_up()
    small = _everything(views)
    whole = open_views(app)
    try:
        for runner in whole.runners:
            runner.batch_size = 100_000
            runner.rebuild()
        assert _everything(whole) == small
    finally:
        whole.close()
    assert small["inbox"]["inbox_calls"], "the flows ask for calls"
    assert any("carol" in row for row in small["reviews"]["review_calls"])
    assert any("hank" in row for row in small["inbox"]["inbox_calls"])


async def test_a_duplicate_call_in_one_batch_still_stops_the_view_at_its_event(
    app: Interlock, views: SqlReadModels
) -> None:
    """A call asked for twice is refused by its table's key as before: a held row does not
    swallow the duplicate, and the view that cannot apply it is named at that event."""
    await seed(app)
    views.catch_up()
    decisions = views.view(DecisionsView)
    start = decisions.position()
    # The backend's IntegrityError, at the commit's flush; the runner retries one by one.
    with pytest.raises(Exception), decisions.batch(start, start + 1):  # noqa: B017
        decisions.chat_started("dup-chat", "bank", "bankingAgent")
        decisions.tool_requested("dup-chat", "r1", "deploy", {})
        decisions.tool_requested("dup-chat", "r1", "deploy", {})
    assert decisions.position() == start
    assert not decisions._fetch("SELECT * FROM {decision_calls} WHERE chat_id = 'dup-chat'", {})
