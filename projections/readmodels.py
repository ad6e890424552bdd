"""The read side as one object: the engine over the registered views, and their queries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from interlock.projections.engine.interface import V
from interlock.projections.engine.pages import Page
from interlock.projections.engine.readmodels import ReadEngine
from interlock.projections.views import export
from interlock.projections.views.chats import ChatFilter, ChatSummary, ChatsView
from interlock.projections.views.decisions import (
    DecisionFilter,
    DecisionRow,
    DecisionStats,
    DecisionsView,
)
from interlock.projections.views.inbox import InboxFilter, InboxRow, InboxView

if TYPE_CHECKING:
    from interlock.projections.backends.replicas import Replica
    from interlock.projections.interface import Queries


class _Queries:
    """The queries over the inbox, decisions and chats views, wherever `view` finds them."""

    def view(self, kind: type[V]) -> V:
        raise NotImplementedError

    def chats(self, f: ChatFilter, limit: int = 50, cursor: str | None = None) -> Page[ChatSummary]:
        return self.view(ChatsView).page(f, limit, cursor)

    def inbox(self, f: InboxFilter, limit: int = 50, cursor: str | None = None) -> Page[InboxRow]:
        return self.view(InboxView).page(f, limit, cursor)

    def inbox_count(self, f: InboxFilter, cap: int) -> int:
        return self.view(InboxView).count(f, cap)

    def inbox_pending(self) -> dict[tuple[str, str], int]:
        return self.view(InboxView).pending_by_tool()

    def decisions(
        self, f: DecisionFilter, limit: int = 50, cursor: str | None = None
    ) -> Page[DecisionRow]:
        return self.view(DecisionsView).page(f, limit, cursor)

    def decision_stats(self, f: DecisionFilter) -> DecisionStats:
        return self.view(DecisionsView).stats(f)

    def export_decisions(self, f: DecisionFilter, fmt: Literal["csv", "jsonl"]) -> Iterator[str]:
        # The first page is read now: a filter the store refuses (a NUL character) is
        # answered before the response starts streaming, not by a broken stream.
        first = self.decisions(f, 1000, None)
        rows = export.rows_of(
            lambda cursor: first if cursor is None else self.decisions(f, 1000, cursor))
        return export.export(rows, fmt)


class SqlReadModels(ReadEngine, _Queries):
    """The `ReadModels` contract: the engine's views and freshness, and the queries over the
    inbox, decisions and chats views (which the wiring hands in, `views.registry`)."""

    def at(self, name: str, position: int | None) -> Queries:
        """The queries over view `name` where they show every event up to `position`: on a
        replica that has applied it (waiting up to the replicas' bound), else here. The
        caller has waited for `position` here (`wait`): a replica never answers behind it."""
        replica = self.replica_for(name, position)
        return self if replica is None else _OnReplica(self, replica)


class _OnReplica(_Queries):
    """The queries, each view read on one replica (what it fails is read on the primary)."""

    def __init__(self, models: SqlReadModels, replica: Replica) -> None:
        self._models, self.replica = models, replica

    def view(self, kind: type[V]) -> V:
        return self._models.on_replica(kind, self.replica)

    def find(self, kind: type[V]) -> V | None:
        return None if self._models.find(kind) is None else self.view(kind)
