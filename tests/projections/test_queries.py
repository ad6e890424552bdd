"""Query functions: filters, keyset pages, statistics and exports that round-trip."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from interlock.domain import Interlock
from interlock.domain.errors import InvalidRequestError
from interlock.projections import SqlReadModels
from interlock.projections.interface import (
    ChatFilter,
    DecisionFilter,
    DecisionRow,
    InboxFilter,
)
from interlock.projections.views import export
from tests.projections.flows import seed

pytestmark = pytest.mark.anyio


def all_pages(models: SqlReadModels, f: DecisionFilter, limit: int) -> list[DecisionRow]:
    return list(export.rows_of(lambda cursor: models.decisions(f, limit, cursor)))


async def test_decision_pages_follow_the_keyset(app: Interlock, models: SqlReadModels) -> None:
    _, position = await seed(app)
    models.wait(position)
    everything = models.decisions(DecisionFilter(), limit=100).items
    assert len(everything) == 8
    assert all_pages(models, DecisionFilter(), 2) == everything
    assert all_pages(models, DecisionFilter(actor="lead"), 1) == [
        r for r in everything if r.actor == "lead"]
    middle = everything[4].decided_at
    assert all_pages(models, DecisionFilter(since=middle), 3) == [
        r for r in everything if r.decided_at >= middle]
    assert all_pages(models, DecisionFilter(until=middle, tool="transferMoney"), 3) == [
        r for r in everything if r.decided_at < middle and r.tool == "transferMoney"]


async def test_inbox_and_chat_filters(app: Interlock, models: SqlReadModels) -> None:
    chats, position = await seed(app)
    models.wait(position)
    (pending,) = models.inbox(InboxFilter(tenant="bank")).items
    assert (pending.tool, pending.requested_by, pending.chat_id) == (
        "userApproval", "alice", str(chats[3]))
    assert models.inbox(InboxFilter(tenant="ops")).items == []
    later = pending.requested_at + timedelta(seconds=1)
    assert models.inbox(InboxFilter(older_than=later, agent="bankingAgent")).items == [pending]
    assert models.inbox(InboxFilter(older_than=pending.requested_at)).items == []
    # The console's count reads the same filters and stops one past its cap.
    assert models.inbox_count(InboxFilter(tenant="bank"), 5) == 1
    assert models.inbox_count(InboxFilter(tenant="bank"), 0) == 1  # one past a cap of 0
    assert models.inbox_count(InboxFilter(tenant="ops"), 5) == 0
    assert models.inbox_count(InboxFilter(older_than=pending.requested_at), 5) == 0
    assert models.inbox_pending() == {(pending.agent, pending.tool): 1}  # the metrics' gauge
    waiting = models.chats(ChatFilter(status="interrupted")).items
    assert [(c.chat_id, c.pending_count) for c in waiting] == [(str(chats[3]), 1)]
    first = models.chats(ChatFilter(), limit=2)
    rest = models.chats(ChatFilter(), limit=10, cursor=first.next_cursor)
    assert len(first.items) + len(rest.items) == len(chats) and rest.next_cursor is None


async def test_stats_since_the_calendars_last_day_count_from_the_rows(
    app: Interlock, models: SqlReadModels
) -> None:
    """No whole day starts after 9999-12-31T00:00Z: rounding up must not overflow."""
    _, position = await seed(app)
    models.wait(position)
    last = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert models.decision_stats(DecisionFilter(tenant="bank", since=last)).total == 0
    assert models.decision_stats(DecisionFilter(tenant="bank", until=last)).total == 5


async def test_decision_stats(app: Interlock, models: SqlReadModels) -> None:
    _, position = await seed(app)
    models.wait(position)
    stats = models.decision_stats(DecisionFilter(tenant="bank"))
    assert stats.total == 5
    assert stats.by_tool == {"transferMoney": 2, "userApproval": 3}
    assert stats.by_actor == {"bob": 3, "carol": 2}
    assert stats.p50_seconds is not None and stats.p95_seconds is not None
    assert 0 <= stats.p50_seconds <= stats.p95_seconds
    assert models.decision_stats(DecisionFilter(actor="nobody")).p50_seconds is None


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
async def test_export_round_trips(app: Interlock, models: SqlReadModels, fmt: str) -> None:
    _, position = await seed(app)
    models.wait(position)
    text = "".join(models.export_decisions(DecisionFilter(), fmt))  # type: ignore[arg-type]
    rows = export.parse(text, fmt)  # type: ignore[arg-type]
    assert rows == models.decisions(DecisionFilter(), limit=100).items
    assert len({(r.chat_id, r.version) for r in rows}) == len(rows) == 8


async def test_a_forged_cursor_is_refused(models: SqlReadModels) -> None:
    with pytest.raises(InvalidRequestError):
        models.decisions(DecisionFilter(), cursor="not-a-cursor")
