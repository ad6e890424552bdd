"""The read side's contract: the queries the HTTP layer and CLI call, and their row shapes.

Each row shape and filter lives with its read model (`inbox`, `decisions`, `chats`) and is
re-exported here; freshness and the lookup of a view by its kind are the engine's
(`engine.interface.ReadSide`). Lists use keyset pagination: `cursor` is opaque,
`next_cursor` is None on the last page.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, Protocol

from interlock.projections.engine.interface import Page, ReadSide, StuckView
from interlock.projections.views.chats import ChatFilter, ChatSummary
from interlock.projections.views.decisions import DecisionFilter, DecisionRow, DecisionStats
from interlock.projections.views.inbox import InboxFilter, InboxRow

__all__ = [
    "ChatFilter",
    "ChatSummary",
    "DecisionFilter",
    "DecisionRow",
    "DecisionStats",
    "InboxFilter",
    "InboxRow",
    "Page",
    "ReadModels",
    "ReadSide",
    "StuckView",
]


class ReadModels(ReadSide, Protocol):
    """All queries of the read side, current to at least the position waited for."""

    def chats(
        self, f: ChatFilter, limit: int = 50, cursor: str | None = None
    ) -> Page[ChatSummary]: ...

    def inbox(
        self, f: InboxFilter, limit: int = 50, cursor: str | None = None
    ) -> Page[InboxRow]: ...

    def inbox_count(self, f: InboxFilter, cap: int) -> int:
        """How many pending interrupts match, counting at most `cap + 1`."""
        ...

    def inbox_pending(self) -> dict[tuple[str, str], int]:
        """How many interrupts wait, by (agent, tool)."""
        ...

    def decisions(
        self, f: DecisionFilter, limit: int = 50, cursor: str | None = None
    ) -> Page[DecisionRow]: ...

    def decision_stats(self, f: DecisionFilter) -> DecisionStats: ...

    def export_decisions(
        self, f: DecisionFilter, fmt: Literal["csv", "jsonl"]
    ) -> Iterator[str]: ...
