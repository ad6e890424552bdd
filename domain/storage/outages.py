"""What an operator reads when a background component (webhook deliverer, notifier,
sweeper, views runner) pauses for the store: one line when it pauses, naming the cause
when it is known (disk full, permission denied, connection refused), and one when it
resumes; no traceback, since an outage is expected, and nothing per retry.

`cause` reads the exception chain (the library's PersistenceError wraps the driver's error)
by errno, SQLite's error code and the words PostgreSQL and SQLite use.
"""

from __future__ import annotations

import errno
import logging
import threading
import time

# SQLite's primary result codes (sqlite3.Error.sqlite_errorcode & 0xFF).
_SQLITE = {13: "disk full", 3: "permission denied", 8: "permission denied",
           23: "permission denied", 14: "cannot open the database file"}
_ERRNO = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk full",
          errno.EACCES: "permission denied", errno.EPERM: "permission denied",
          errno.EROFS: "permission denied", errno.ECONNREFUSED: "connection refused"}
_WORDS = (
    ("disk full", ("database or disk is full", "no space left on device", "disk full",
                   "could not extend file", "disk quota exceeded")),
    ("permission denied", ("permission denied", "readonly database", "read-only file system",
                           "read-only database")),
    ("connection refused", ("connection refused",)),
    ("authentication failed", ("password authentication failed",)),
    ("no answer", ("no answer within", "timed out", "timeout expired")),
)


def _chain(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    at: BaseException | None = exc
    while at is not None and all(at is not e for e in found):
        found.append(at)
        at = at.__cause__ or at.__context__
    return found


def _named(exc: BaseException) -> str | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _SQLITE:
        return _SQLITE[code & 0xFF]
    number = getattr(exc, "errno", None)
    if isinstance(number, int) and number in _ERRNO:
        return _ERRNO[number]
    text = str(exc).lower()
    return next((name for name, words in _WORDS if any(w in text for w in words)), None)


def cause(exc: BaseException) -> str:
    """'disk full (OperationalError: database or disk is full)': the cause when known, then
    the innermost error, on one line."""
    chain = _chain(exc)
    named = next((n for n in map(_named, chain) if n is not None), None)
    root = chain[-1]
    detail = " ".join(str(root).split())[:300]
    said = f"{type(root).__name__}: {detail}" if detail else type(root).__name__
    return f"{named} ({said})" if named else said


class StorePause:
    """A component's pause for the store: `down` logs once per outage, `up` once after it."""

    def __init__(self, component: str, logger: logging.Logger) -> None:
        self.component, self.log = component, logger
        self._since: float | None = None
        self._lock = threading.Lock()

    @property
    def paused(self) -> bool:
        return self._since is not None

    def down(self, exc: BaseException) -> None:
        """The store failed the component: say so, with the cause, if it was running."""
        with self._lock:
            if self._since is not None:
                return
            self._since = time.monotonic()
        self.log.warning("%s paused: the store is unavailable, %s; retrying with backoff",
                         self.component, cause(exc))

    def up(self) -> None:
        """The component did its work: say it resumed, if it was paused."""
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            self.log.warning("%s resumed: the store answers again after %.1fs down",
                             self.component, time.monotonic() - since)
