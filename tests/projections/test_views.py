"""The views equal what the event log implies, on SQLite and PostgreSQL."""

from __future__ import annotations

from uuid import UUID

import pytest

from interlock.domain import Interlock, RespondEntry, RestartEntry
from interlock.domain.errors import InterlockError
from interlock.projections import SqlReadModels
from interlock.projections.interface import ChatFilter, DecisionFilter, InboxFilter
from tests.projections.conftest import dumps
from tests.projections.flows import (
    expected_chats,
    expected_decisions,
    expected_inbox,
    seed,
)

pytestmark = pytest.mark.anyio


async def test_views_equal_the_log_after_the_seed_flows(
    app: Interlock, models: SqlReadModels
) -> None:
    chats, position = await seed(app)
    models.wait(position)
    assert models.inbox(InboxFilter(), limit=100).items == expected_inbox(app, chats)
    assert models.decisions(DecisionFilter(), limit=100).items == expected_decisions(app, chats)
    assert models.chats(ChatFilter(), limit=100).items == expected_chats(app, chats)
    assert models.is_current()


async def test_a_refused_resume_leaves_no_trace(app: Interlock, models: SqlReadModels) -> None:
    chats, position = await seed(app)
    models.wait(position)
    before = dumps(models), models.positions()
    pending = models.inbox(InboxFilter(), limit=1).items[0]
    decided = models.decisions(DecisionFilter(chat_id=str(chats[0])), limit=1).items[0]
    attempts = [
        (pending.chat_id, {"respond": [RespondEntry(ref="nope", name="userApproval")]}),
        (pending.chat_id, {"respond": [RespondEntry(ref=pending.ref, name="transferMoney")]}),
        (decided.chat_id, {"respond": [RespondEntry(ref=decided.ref, name=decided.tool)]}),
        (pending.chat_id, {"restart": [RestartEntry(ref=pending.ref, name=pending.tool)] * 2}),
    ]
    for chat_id, entries in attempts:
        with pytest.raises(InterlockError):
            await app.resume(UUID(chat_id), actor="mallory", **entries)  # type: ignore[arg-type]
    models.catch_up()
    assert (dumps(models), models.positions()) == before


async def test_read_your_writes_after_each_commit(app: Interlock, models: SqlReadModels) -> None:
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
    result = await app.send(chat.id, "transfer $70 to savings", actor="alice")
    models.wait(result.position)
    assert [r.ref for r in models.inbox(InboxFilter(chat_id=str(chat.id))).items] == [
        i.ref for i in result.interrupts]
    done = await app.resume(chat.id, actor="bob", respond=[RespondEntry(
        ref=result.interrupts[0].ref, name="userApproval", output={"approved": False})])
    models.wait(done.position)
    assert models.inbox(InboxFilter(chat_id=str(chat.id))).items == []
    summary = models.chats(ChatFilter(tenant="bank")).items[0]
    assert (summary.status, summary.version) == ("idle", app.get_chat(chat.id).version)
