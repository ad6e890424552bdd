"""The read side's contract: row shapes and the queries the HTTP layer and CLI call.

Implemented for SQLite and PostgreSQL (and memory) by the modules beside this one.
Lists use keyset pagination: `cursor` is opaque, `next_cursor` is None on the last page.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = None


class InboxRow(BaseModel):
    """A pending interrupt awaiting a decision."""

    model_config = ConfigDict(frozen=True)

    chat_id: str
    tenant: str
    agent: str
    ref: str
    tool: str
    input: Any = None
    metadata: Any = None  # the interrupt payload: any JSON value
    requested_at: datetime
    requested_by: str | None = None


class DecisionRow(BaseModel):
    """One Responded or Restarted event: the compliance log."""

    model_config = ConfigDict(frozen=True)

    chat_id: str
    tenant: str
    agent: str
    ref: str
    tool: str
    kind: Literal["respond", "restart"]
    original_input: Any = None
    replaced_input: Any = None
    output: Any = None
    resumed_metadata: dict[str, Any] | None = None
    actor: str
    input_sha256: str
    requested_at: datetime
    decided_at: datetime
    version: int


class ChatSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    chat_id: str
    tenant: str
    agent: str
    status: str
    version: int
    created_at: datetime
    last_activity: datetime
    pending_count: int


class DecisionStats(BaseModel):
    total: int
    by_tool: dict[str, int]
    by_actor: dict[str, int]
    p50_seconds: float | None
    p95_seconds: float | None


class DecisionFilter(BaseModel):
    model_config = ConfigDict(frozen=True)

    tenant: str | None = None
    tool: str | None = None
    actor: str | None = None
    chat_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


class InboxFilter(BaseModel):
    model_config = ConfigDict(frozen=True)

    tenant: str | None = None
    agent: str | None = None
    tool: str | None = None
    chat_id: str | None = None
    older_than: datetime | None = None


class ChatFilter(BaseModel):
    model_config = ConfigDict(frozen=True)

    tenant: str | None = None
    status: str | None = None
    agent: str | None = None


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

    def wait(self, position: int | None, timeout: float = 5.0) -> None:
        """Block until every view has processed the event at `position` (read-your-writes)."""

    def is_current(self) -> bool:
        """True when every view has processed the last recorded event."""

    def lag(self) -> int:
        """How many recorded events some view has not processed yet."""

    def stopped(self) -> bool:
        """True when the views stopped on an event they could not apply."""

    def close(self) -> None: ...
