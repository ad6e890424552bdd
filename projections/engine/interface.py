"""The read side's contract: the queries the HTTP layer and CLI call, and their row shapes.

Each row shape and filter lives with its read model (`inbox`, `decisions`, `chats`) and is
re-exported here. Lists use keyset pagination: `cursor` is opaque, `next_cursor` is None
on the last page.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Literal, Protocol

from interlock.projections.engine.pages import Page
from interlock.projections.engine.stuck import StuckView
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
    "StuckView",
]


class ReadModels(Protocol):
    """All queries of the read side, current to at least the position waited for."""

    def chats(
        self, f: ChatFilter, limit: int = 50, cursor: str | None = None
    ) -> Page[ChatSummary]: ...

    def inbox(
        self, f: InboxFilter, limit: int = 50, cursor: str | None = None
    ) -> Page[InboxRow]: ...

    def decisions(
        self, f: DecisionFilter, limit: int = 50, cursor: str | None = None
    ) -> Page[DecisionRow]: ...

    def decision_stats(self, f: DecisionFilter) -> DecisionStats: ...

    def export_decisions(
        self, f: DecisionFilter, fmt: Literal["csv", "jsonl"]
    ) -> Iterator[str]: ...

    def wait(self, position: int | None, timeout: float = 5.0,
             views: Collection[str] | None = None) -> None:
        """Block until every view (or those named) has processed the event at `position`
        (read-your-writes)."""

    def is_current(self) -> bool:
        """True when every view has processed the last recorded event."""

    def lag(self) -> int:
        """How many recorded events some view has not processed yet."""

    def stopped(self) -> bool:
        """True while a view is stuck on an event or the views cannot catch up."""

    def stuck(self) -> list[StuckView]:
        """The views stuck on an event they cannot apply: which view, which event, why."""

    def close(self) -> None: ...
