"""Group commit: appends that arrive together share one transaction, one lock and one fsync.

Callers are threads. Whoever finds no flush under way becomes the leader: it takes every
queued append (one per chat at most, so two appends of one chat never meet in one
statement), flushes them together and wakes the rest; a caller whose append is still
queued then leads the next flush. A lone caller never waits for a timer: it pays nothing.
Under load the next batch fills while the current one is on disk, and once a batch held
more than one append (others are writing too, as PostgreSQL's `commit_siblings`), the next
leader gathers for up to `gather` seconds, until as many appends as last time are queued:
fewer, fuller transactions, for at most that much latency.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import IntegrityError, StoredEvent


@dataclass(eq=False)
class Append:
    """One caller's events, and what became of them."""

    events: Sequence[StoredEvent]
    # (stream, version): refuse the events if that stream holds an event at that version
    # (it moved past what the caller read); nothing is written for a guard
    # (domain/services/policy_books.py)
    guards: Sequence[tuple[Any, int]] = ()
    ids: list[int] | None = None
    error: BaseException | None = None
    done: bool = False
    sent: bool = False  # a flush has sent it: a refusal on a retry may be its own commit

    @functools.cached_property
    def chats(self) -> set[Any]:  # read twice a batch; a UUID's hash runs Python
        return {e.originator_id for e in self.events}


Flush = Callable[[list[Append]], None]
"""Writes a batch in one transaction; sets `ids` on each append, or `error` on a conflict."""


@dataclass
class GroupCommit:
    """Coalesces concurrent `submit` calls into batches handed to `flush`."""

    flush: Flush
    max_batch: int = 256
    gather: float = 0.002
    batches: int = 0
    appends: int = 0
    _queue: list[Append] = field(default_factory=list)
    _busy: bool = False
    _last: int = 0  # the size of the last batch
    _gathering: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cond: threading.Condition = field(init=False)  # a flush ended: callers look again
    _gathered: threading.Condition = field(init=False)  # the gathering leader's own wait

    def __post_init__(self) -> None:
        self._cond = threading.Condition(self._lock)
        self._gathered = threading.Condition(self._lock)

    def submit(self, events: Sequence[StoredEvent],
               guards: Sequence[tuple[Any, int]] = ()) -> list[int]:
        """Append `events` with whatever else is waiting; their notification ids."""
        mine = Append(events, guards)
        with self._cond:
            self._queue.append(mine)
            if self._gathering and len(self._queue) >= self._last:
                self._gathered.notify()  # the leader has what it waited for
        while not mine.done:
            batch = self._lead_or_wait(mine)
            if batch:
                self._run(batch)
        if mine.error is not None:
            raise mine.error
        assert mine.ids is not None
        return mine.ids

    def _lead_or_wait(self, mine: Append) -> list[Append]:
        with self._cond:
            while self._busy and not mine.done:
                self._cond.wait()
            if mine.done:
                return []
            self._busy = True
            if self._last > 1 and self.gather > 0:
                self._gathering = True
                self._gathered.wait_for(lambda: len(self._queue) >= self._last, self.gather)
                self._gathering = False
            return self._take()

    def _take(self) -> list[Append]:
        batch: list[Append] = []
        seen: set[Any] = set()
        for append in list(self._queue):
            if len(batch) == self.max_batch:
                break
            if append.chats & seen:
                continue  # the same chat twice: the later one goes in the next batch
            seen |= append.chats
            batch.append(append)
            self._queue.remove(append)
        return batch

    def _run(self, batch: list[Append]) -> None:
        try:
            self.flush(batch)
        finally:
            failure = sys.exc_info()[1]  # the flush's own error reaches every caller of the batch
            with self._cond:
                self.batches += 1
                self.appends += len(batch)
                self._last = len(batch)
                for append in batch:
                    if append.ids is None and append.error is None:
                        append.error = failure or RuntimeError("the batch was not written")
                    append.done = True
                self._busy = False
                self._cond.notify_all()


def conflict(append: Append) -> IntegrityError:
    chats = ", ".join(sorted(str(c) for c in append.chats))
    return IntegrityError(f"an event of chat {chats} was recorded concurrently")
