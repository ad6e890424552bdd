"""The read side as one object: keeps its views current and answers the queries."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeVar

from eventsourcing.application import Application
from eventsourcing.persistence import Recording

from interlock.projections import cursors, export
from interlock.projections.interface import (
    ChatFilter,
    ChatSummary,
    DecisionFilter,
    DecisionRow,
    DecisionStats,
    InboxFilter,
    InboxRow,
    Page,
)
from interlock.projections.projectors import ChatsProjection, DecisionsProjection, InboxProjection
from interlock.projections.runner import BatchRunner
from interlock.projections.views import ChatsView, DecisionsView, InboxView, Key

T = TypeVar("T")
log = logging.getLogger(__name__)
COALESCE_SECONDS = 0.005
Views = tuple[InboxView, DecisionsView, ChatsView]


def _page(rows: list[T], limit: int, key: Callable[[T], Key]) -> Page[T]:
    more = len(rows) > limit
    items = rows[:limit]
    return Page(items=items, next_cursor=cursors.encode(key(items[-1])) if more else None)


class SqlReadModels:
    """Queries over the views (the `ReadModels` contract) and, if asked, their runner."""

    def __init__(
        self,
        app: Application[Any],
        views: Views,
        *,
        on_close: Callable[[], None] | None = None,
        batch_size: int = 1000,
    ) -> None:
        self.app = app
        self.inbox_view, self.decisions_view, self.chats_view = views
        self.runners = [
            BatchRunner(app, InboxProjection(self.inbox_view), batch_size),
            BatchRunner(app, DecisionsProjection(self.decisions_view), batch_size),
            BatchRunner(app, ChatsProjection(self.chats_view), batch_size),
        ]
        wanted = [r.projection.topics for r in self.runners]
        self._topics = () if not all(wanted) else sorted({t for ts in wanted for t in ts})
        self._on_close = on_close
        self._live: LiveRunner | None = None

    # -- queries -----------------------------------------------------------------------------

    def chats(self, f: ChatFilter, limit: int = 50, cursor: str | None = None) -> Page[ChatSummary]:
        rows = self.chats_view.query(f, limit + 1, cursors.decode(cursor, str))
        return _page(rows, limit, lambda r: (r.last_activity, r.chat_id))

    def inbox(self, f: InboxFilter, limit: int = 50, cursor: str | None = None) -> Page[InboxRow]:
        rows = self.inbox_view.query(f, limit + 1, cursors.decode(cursor, str, str))
        return _page(rows, limit, lambda r: (r.requested_at, r.chat_id, r.ref))

    def decisions(
        self, f: DecisionFilter, limit: int = 50, cursor: str | None = None
    ) -> Page[DecisionRow]:
        rows = self.decisions_view.query(f, limit + 1, cursors.decode(cursor, str, int))
        return _page(rows, limit, lambda r: (r.decided_at, r.chat_id, r.version))

    def decision_stats(self, f: DecisionFilter) -> DecisionStats:
        return self.decisions_view.stats(f)

    def export_decisions(self, f: DecisionFilter, fmt: Literal["csv", "jsonl"]) -> Iterator[str]:
        rows = export.rows_of(lambda cursor: self.decisions(f, 1000, cursor))
        return export.export(rows, fmt)

    # -- freshness ---------------------------------------------------------------------------

    def positions(self) -> dict[str, int]:
        return {r.name: r.view.position() for r in self.runners}

    def catch_up(self) -> int:
        """Bring every view up to the log's head now, in this thread; the lowest position.

        The views share each read of the log and each decoded event; each view still
        commits its rows and position in its own transaction.
        """
        head = self.app.recorder.max_notification_id() or 0
        positions = [r.view.position() for r in self.runners]
        while min(positions) < head:
            positions = self._shared_step(positions, head)
        return min(positions)

    def _shared_step(self, positions: list[int], head: int) -> list[int]:
        start, size = min(positions), self.runners[0].batch_size
        notes = self.app.recorder.select_notifications(
            start, size, stop=head, topics=self._topics, inclusive_of_start=False)
        upto = notes[-1].id if len(notes) == size else head
        events = [(n.id, n.topic, self.app.mapper.to_domain_event(n)) for n in notes]
        return [r.apply(events, p, upto) for r, p in zip(self.runners, positions, strict=True)]

    def is_current(self) -> bool:
        return self.lag() == 0

    def lag(self) -> int:
        head = self.app.recorder.max_notification_id() or 0
        return max(0, head - min(self.positions().values()))

    def stopped(self) -> bool:
        return self._live is not None and self._live.error is not None

    def wait(self, position: int | None, timeout: float = 5.0) -> None:
        if position is None:
            return
        if self._live is not None:
            self._live.wait(position, timeout)
            return
        deadline = time.monotonic() + timeout
        while min(self.positions().values()) < position:
            if time.monotonic() > deadline:
                raise TimeoutError(f"views have not reached position {position}")
            time.sleep(0.05)  # another process runs the views: poll their positions

    def start(self, poll_interval: float = 0.5) -> None:
        """Keep the views current from a thread of this process (the embedded default)."""
        self._live = LiveRunner(self, poll_interval)
        self._live.start()

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._on_close is not None:
            self._on_close()


class LiveRunner:
    """A thread that catches the views up after each commit and every `poll_interval`."""

    def __init__(self, models: SqlReadModels, poll_interval: float) -> None:
        self.models = models
        self.poll_interval = poll_interval
        self._wake = threading.Event()
        self._hurry = threading.Event()  # a reader is waiting: no coalescing delay
        self._stopping = threading.Event()
        self._changed = threading.Condition()
        self._seen = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="interlock-views", daemon=True)

    def start(self) -> None:
        listeners = getattr(self.models.app, "commit_listeners", None)
        if listeners is not None:
            listeners.append(self._on_commit)
        self._thread.start()

    def _on_commit(self, recordings: Sequence[Recording[Any]]) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            self._hurry.clear()
            try:
                seen = self.models.catch_up()
            except BaseException as exc:
                # Like the library's runner: a failing event stops the views, loudly;
                # waiters get the error instead of a stale read.
                log.exception("read models stopped: an event could not be applied")
                self._fail(exc)
                return
            self._publish(seen)
            if self._wake.wait(self.poll_interval):
                # Woken by a commit: let its writer answer first and gather the commits
                # that follow, unless a reader is waiting for the views.
                self._hurry.wait(COALESCE_SECONDS)

    @property
    def error(self) -> BaseException | None:
        return self._error

    def _publish(self, seen: int) -> None:
        with self._changed:
            self._seen = seen
            self._changed.notify_all()

    def _fail(self, exc: BaseException) -> None:
        with self._changed:
            self._error = exc
            self._changed.notify_all()

    def wait(self, position: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._seen < position:
                if self._error is not None:
                    raise self._error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"views have not reached position {position}")
                self._hurry.set()
                self._wake.set()
                self._changed.wait(remaining)

    def stop(self) -> None:
        listeners = getattr(self.models.app, "commit_listeners", None)
        if listeners is not None and self._on_commit in listeners:
            listeners.remove(self._on_commit)
        self._stopping.set()
        self._hurry.set()
        self._wake.set()
        self._thread.join()
