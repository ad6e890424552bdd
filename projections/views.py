"""View interfaces: what the projections write and what the read side queries.

Each view is written in batches: `batch(start, upto)` opens one transaction that refuses
to run unless the view's tracking position is still `start` (compare-and-set), and
records `upto` as the new position with the rows, so every event is applied exactly once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

from eventsourcing.persistence import IntegrityError, TrackingRecorder

from interlock.projections.interface import (
    ChatFilter,
    ChatSummary,
    DecisionFilter,
    DecisionRow,
    DecisionStats,
    InboxFilter,
    InboxRow,
)

Key = tuple[Any, ...]


class PositionConflictError(IntegrityError):
    """Another runner moved the view's tracking position: this batch is refused."""

    def __init__(self, view: str, expected: int, found: int | None) -> None:
        super().__init__(f"view {view}: expected position {expected}, found {found}")
        self.view, self.expected, self.found = view, expected, found


class View(TrackingRecorder, ABC):
    """A tracked read model: rows plus the position of the last event applied."""

    view_name: ClassVar[str]

    @abstractmethod
    def position(self) -> int:
        """The notification id up to which events have been applied (0 when empty)."""

    @abstractmethod
    def batch(self, start: int, upto: int) -> AbstractContextManager[None]:
        """One transaction applying the events in (start, upto]; conflicts if moved."""

    @abstractmethod
    def drop(self) -> None:
        """Remove the view's tables and tracking (rebuild starts from nothing)."""

    @abstractmethod
    def setup(self) -> None:
        """Create the view's tables if missing."""

    @abstractmethod
    def dump(self) -> list[dict[str, Any]]:
        """Every row of the view in a stable order (tests, rebuild checks)."""


class InboxView(View):
    view_name = "inbox"

    @abstractmethod
    def chat_started(self, chat_id: str, tenant: str, agent: str) -> None: ...

    @abstractmethod
    def message_sent(self, chat_id: str, actor: str) -> None: ...

    @abstractmethod
    def tool_requested(self, chat_id: str, ref: str, name: str, input: Any) -> None: ...

    @abstractmethod
    def interrupted(
        self, chat_id: str, ref: str, metadata: Any, at: datetime
    ) -> None: ...

    @abstractmethod
    def input_replaced(self, chat_id: str, ref: str, input: Any) -> None: ...

    @abstractmethod
    def decided(self, chat_id: str, ref: str) -> None: ...

    @abstractmethod
    def query(self, f: InboxFilter, limit: int, after: Key | None) -> list[InboxRow]: ...


class DecisionsView(View):
    view_name = "decisions"

    @abstractmethod
    def chat_started(self, chat_id: str, tenant: str, agent: str) -> None: ...

    @abstractmethod
    def tool_requested(self, chat_id: str, ref: str, name: str, input: Any) -> None: ...

    @abstractmethod
    def interrupted(self, chat_id: str, ref: str, at: datetime) -> None: ...

    @abstractmethod
    def input_replaced(self, chat_id: str, ref: str, input: Any) -> None: ...

    @abstractmethod
    def decided(self, decision: Decided) -> None: ...

    @abstractmethod
    def query(self, f: DecisionFilter, limit: int, after: Key | None) -> list[DecisionRow]: ...

    @abstractmethod
    def stats(self, f: DecisionFilter) -> DecisionStats: ...


class ChatsView(View):
    view_name = "chats"

    @abstractmethod
    def chat_started(
        self, chat_id: str, tenant: str, agent: str, version: int, at: datetime
    ) -> None: ...

    @abstractmethod
    def status_changed(self, chat_id: str, status: str | None, pending_delta: int) -> None: ...

    @abstractmethod
    def touched(self, chat_id: str, version: int, at: datetime) -> None: ...

    @abstractmethod
    def query(self, f: ChatFilter, limit: int, after: Key | None) -> list[ChatSummary]: ...


@dataclass(frozen=True)
class Decided:
    """A Responded or Restarted event; the view joins tenant, agent, tool and requested_at.

    `original_input` is None for a respond: the view takes the input it saw requested.
    """

    chat_id: str
    version: int
    ref: str
    kind: Literal["respond", "restart"]
    actor: str
    input_sha256: str
    decided_at: datetime
    original_input: Any = None
    replaced_input: Any = None
    output: Any = None
    resumed_metadata: dict[str, Any] | None = None
