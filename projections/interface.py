"""The read side's contract: the queries the HTTP layer and CLI call, and their row shapes.

Each row shape and filter lives with its read model (`inbox`, `decisions`, `chats`) and is
re-exported here; freshness and the lookup of a view by its kind are the engine's
(`engine.interface.ReadSide`). Lists use keyset pagination: `cursor` is opaque,
`next_cursor` is None on the last page.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, Protocol

from interlock.projections.engine.interface import Page, ReadSide, StuckView, V
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
    "Queries",
    "ReadModels",
    "ReadSide",
    "StuckView",
]


class Queries(Protocol):
    """The queries over the inbox, decisions and chats views, and each view by its kind."""

    def view(self, kind: type[V]) -> V: ...

    def find(self, kind: type[V]) -> V | None: ...

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


class ReadModels(ReadSide, Queries, Protocol):
    """All queries of the read side, current to at least the position waited for."""

    def at(self, name: str, position: int | None) -> Queries:
        """The queries over view `name` where they show `position`: a read replica that has
        applied it, else these views (waited for first: `wait`)."""

    def replica_states(self, probe: bool = False) -> list[dict[str, Any]] | None:
        """Each read replica's state (None: none configured), probed now if `probe`."""
