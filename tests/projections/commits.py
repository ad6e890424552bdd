"""Counting the event store's commits: each `insert_events` call is one transaction."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from interlock.domain import Interlock


class Commits:
    """How many transactions the wrapped recorder committed, and how many events."""

    def __init__(self) -> None:
        self.commits = 0
        self.events = 0


@contextmanager
def counting(app: Interlock) -> Iterator[Commits]:
    """Count the commits `app` makes to its event store inside the block."""
    recorder = app.recorder
    inner = recorder.insert_events
    seen = Commits()

    def insert_events(stored_events: Sequence[Any], **kwargs: Any) -> Any:
        ids = inner(stored_events, **kwargs)
        seen.commits += 1
        seen.events += len(stored_events)
        return ids

    recorder.insert_events = insert_events  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        del recorder.insert_events  # the class's method again
