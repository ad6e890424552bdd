"""The in-process runner: catches the views up after each commit and every poll interval."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from eventsourcing.persistence import PersistenceError, Recording

from interlock.domain.errors import UnavailableError
from interlock.domain.storage.outages import cause

log = logging.getLogger(__name__)
# A commit wakes the runner, which gathers the commits of this long before its pass (unless a
# reader waits for the views): a pass costs about as much as the cycle's own writes, so at one
# client a pass a cycle was a third of the server's work; a view seen 0.1 s late is still fresh
# for the people and webhooks that read it, and readers that need their writes wait for them.
COALESCE_SECONDS = 0.1
FIRST_RETRY, LAST_RETRY = 0.5, 30.0  # seconds between passes while the store fails
FOLLOW_RETRY = 1.0  # seconds between a follower's tries to take over from the leader


class LeaderLostError(Exception):
    """The store connection behind the leader election failed: elect again later."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.reason = type(cause).__name__  # what a log line may say: no row's data


class Leader(Protocol):
    """Who applies the views when several processes share a store (see ViewLeader)."""

    leading: bool

    def try_lead(self) -> bool: ...

    def wait(self, timeout: float) -> None: ...

    def head(self) -> int | None:
        """The log's head as the appends heard since the last call announced it (None:
        unknown, read it)."""

    def interrupt(self) -> None: ...

    def close(self) -> None: ...


class Driven(Protocol):
    """What the runner drives: the read engine (`readmodels.ReadEngine`), as seen from here."""

    @property
    def app(self) -> object:
        """The application whose commits wake the runner (its `commit_listeners`)."""

    @property
    def applied(self) -> Mapping[str, int]:
        """Each view's position after the last pass."""

    def committed(self, recordings: Sequence[Recording[Any]]) -> None: ...

    def setup(self) -> None: ...

    def catch_up(self, *, head: int | None = None) -> int: ...

    def check_not_stuck(self, position: int, views: Collection[str] | None = None) -> None: ...


class LiveRunner:
    """A thread that catches the views up after each commit and every `poll_interval`.

    Each pass applies everything committed since the last one, in shared batches.
    A pass that fails (store unreachable, tables being replaced) is retried with backoff,
    logged once when the failures begin and once when they end; the views never stop for
    good, and a store seen back (`revive`) ends the backoff at once. A view stuck on one
    event is the read models' business (StuckViews): the others go on.
    """

    def __init__(
        self, models: Driven, poll_interval: float, leader: Leader | None = None
    ) -> None:
        self.models = models
        self.poll_interval = poll_interval
        self.leader = leader  # None: this process alone applies the views
        self._wake = threading.Event()
        self._hurry = threading.Event()  # a reader is waiting: no coalescing delay
        self._stopping = threading.Event()
        self._revive = threading.Event()  # the store answers again: retry now
        self._changed = threading.Condition()
        self._seen = 0
        # The next pass reads the log's head (True), or goes up to the head the appends'
        # notifications told the leader of, where this process's own commits vouch for it
        # (`ReadEngine.catch_up`): asking the store where the log ends is a round trip a
        # pass (87 k instructions). A poll, a reader waiting, a failure and a follower's
        # turn read it.
        self._look = True
        self.passes = 0  # passes that applied the log up to its head (a metric)
        self._error: BaseException | None = None
        self._failing_since = 0.0
        self._thread = threading.Thread(target=self._loop, name="interlock-views", daemon=True)

    def start(self) -> None:
        listeners = getattr(self.models.app, "commit_listeners", None)
        if listeners is not None:
            listeners.append(self._on_commit)
        self._thread.start()

    def _on_commit(self, recordings: Sequence[Recording[Any]]) -> None:
        if self.leader is None or self.leader.leading:  # a follower's passes apply nothing
            self.models.committed(recordings)
        self._wake.set()

    def _loop(self) -> None:
        delay = FIRST_RETRY
        while not self._stopping.is_set():
            self._wake.clear()
            self._hurry.clear()
            if not self._lead():
                self._look = True
                self._stopping.wait(FOLLOW_RETRY)  # another process applies the views
                continue
            if not self._pass():
                if self._revive.wait(delay):
                    self._revive.clear()
                    delay = FIRST_RETRY
                else:
                    delay = min(LAST_RETRY, delay * 2)
                continue
            delay = FIRST_RETRY
            if self.leader is not None:
                if self._wait_appends():  # any process's append wakes the leader
                    self._hurry.wait(COALESCE_SECONDS)
            elif self._wake.wait(self.poll_interval):
                # Woken by a commit: let its writer answer first and gather the commits
                # that follow, unless a reader is waiting for the views.
                self._hurry.wait(COALESCE_SECONDS)

    def _lead(self) -> bool:
        """True if this process applies the views (alone, or as the elected leader)."""
        if self.leader is None:
            return True
        try:
            leading = self.leader.try_lead()
        except LeaderLostError as exc:
            if self._error is None:  # once per streak, as a failing pass
                self._failing_since = time.monotonic()
                log.warning("views: cannot take part in the leader election (%s)",
                            exc.reason)
            self._fail(exc)
            self.leader.close()
            return False
        if not leading:
            with self._changed:
                self._error = None  # following is a healthy state: readers poll the views
        return leading

    def _wait_appends(self) -> bool:
        assert self.leader is not None
        try:
            self.leader.wait(self.poll_interval)
        except LeaderLostError as exc:
            log.warning("views: lost the append notifications (%s)", exc.reason)
            self.leader.close()
            return False
        return True

    @property
    def following(self) -> bool:
        """True while another process applies the views: this one only reads them."""
        return self.leader is not None and not self.leader.leading and self._error is None

    def _pass(self) -> bool:
        try:
            if self._error is not None:
                self.models.setup()  # re-attach: recreate tables dropped under us
            look, self._look = self._look or self._error is not None, False
            told = self.leader.head() if self.leader is not None else None
            seen = self.models.catch_up(head=None if look else told)
        except (PersistenceError, UnavailableError, sqlite3.Error) as exc:  # the store
            if self._error is None:  # one line per streak; the class only: no row's data
                self._failing_since = time.monotonic()
                log.warning("views paused: cannot catch up, the store is unavailable, %s;"
                            " retrying with backoff", cause(exc))
            self._fail(exc)
            return False
        except Exception as exc:  # broad on purpose: whatever failed, the views must go on
            if self._error is None:
                self._failing_since = time.monotonic()
                log.exception("views: a pass failed; retrying with backoff")
            self._fail(exc)
            return False
        self._publish(seen)
        return True

    def revive(self) -> None:
        """The store answers again: end the backoff now instead of at its end."""
        self._revive.set()

    @property
    def error(self) -> BaseException | None:
        """The error of the last pass, while passes keep failing."""
        return self._error

    def _publish(self, seen: int) -> None:
        with self._changed:
            if self._error is not None:
                log.warning("views resumed: catching up again after %.1fs of failures",
                            time.monotonic() - self._failing_since)
            self._seen, self._error = seen, None
            self.passes += 1
            self._changed.notify_all()

    def _fail(self, exc: BaseException) -> None:
        with self._changed:
            self._look = True
            self._error = exc
            self._changed.notify_all()

    def wait(self, position: int, timeout: float, views: Collection[str] | None = None) -> None:
        """Block until the views (those named, or all) reach `position`; TimeoutError if
        they cannot in time."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._reached(views) < position:
                self.models.check_not_stuck(position, views)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    failing = (f" (failing: {type(self._error).__name__})"
                               if self._error is not None else "")
                    raise TimeoutError(f"views have not reached position {position}{failing}")
                self._look = True  # it may wait for another process's append
                self._hurry.set()
                self._wake.set()
                self._changed.wait(remaining)

    def _reached(self, views: Collection[str] | None) -> int:
        if views is None:
            return self._seen
        applied = self.models.applied
        return min((applied.get(name, 0) for name in views), default=self._seen)

    def stop(self) -> None:
        listeners = getattr(self.models.app, "commit_listeners", None)
        if listeners is not None and self._on_commit in listeners:
            listeners.remove(self._on_commit)
        self._stopping.set()
        self._revive.set()
        self._hurry.set()
        self._wake.set()
        if self.leader is not None and self.leader.leading:
            self.leader.interrupt()  # it may be waiting for an append
        self._thread.join()
        if self.leader is not None:
            self.leader.close()
