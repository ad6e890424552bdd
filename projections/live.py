"""The in-process runner: catches the views up after each commit and every poll interval."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import Recording

if TYPE_CHECKING:
    from interlock.projections.readmodels import SqlReadModels

log = logging.getLogger(__name__)
COALESCE_SECONDS = 0.005


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
