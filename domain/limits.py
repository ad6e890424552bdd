"""Bounds on what one request may make the service keep and copy.

A chat's `metadata` is recorded in its first event and copied by every fork; each fork
copies the whole history. Unbounded, one client could record 900 KB of metadata or 60,000
keys per chat and fork a chat 150 times in 1.6 s. Each bound is a setting
(docs/configuration.md) and its refusal names it.

The fork rate is counted per source chat in this process (a deployment of N workers
admits up to N times the rate); every fork, whatever door it came through (`/v1`, the
console), passes `Interlock.fork`, which asks `Limits.fork`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any
from uuid import UUID

from interlock.domain.errors import InvalidRequestError

WINDOW = 60.0  # seconds: the fork rate is per minute
MAX_TRACKED = 100_000  # source chats whose recent forks are remembered


class MetadataTooLargeError(InvalidRequestError):
    code = "metadata_too_large"
    status = 413

    def __init__(self, setting: str, limit: int, found: int, unit: str) -> None:
        super().__init__(f"metadata holds {found} {unit}, more than {setting}={limit}",
                         limit=setting, max=limit, found=found)


class TooManyForksError(InvalidRequestError):
    code = "too_many_forks"
    status = 429

    def __init__(self, chat_id: UUID, limit: int, retry_after: int) -> None:
        super().__init__(f"chat {chat_id} was forked {limit} times in the last minute, the"
                         f" limit INTERLOCK_FORKS_PER_MINUTE={limit}; retry in {retry_after}s",
                         chat_id=str(chat_id), limit="INTERLOCK_FORKS_PER_MINUTE", max=limit,
                         retry_after=retry_after)
        self.retry_after = retry_after


class Limits:
    """The bounds (0: none) and the recent forks they count."""

    def __init__(self, *, forks_per_minute: int = 30, metadata_bytes: int = 64 * 1024,
                 metadata_keys: int = 1000, history_bytes: int = 4 << 20,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.forks_per_minute = forks_per_minute
        self.metadata_bytes, self.metadata_keys = metadata_bytes, metadata_keys
        self.history_bytes = history_bytes  # one Agent Protocol history page's states
        self._clock = clock
        self._forks: dict[UUID, deque[float]] = {}
        self._lock = threading.Lock()

    def metadata(self, metadata: dict[str, Any] | None) -> None:
        """Refuse metadata past INTERLOCK_MAX_METADATA_KEYS or INTERLOCK_MAX_METADATA_BYTES."""
        if not metadata:
            return
        keys = _count_keys(metadata, self.metadata_keys)
        if self.metadata_keys and keys > self.metadata_keys:
            raise MetadataTooLargeError("INTERLOCK_MAX_METADATA_KEYS", self.metadata_keys,
                                        keys, "keys")
        size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":"),
                              default=str).encode("utf-8", "surrogatepass"))
        if self.metadata_bytes and size > self.metadata_bytes:
            raise MetadataTooLargeError("INTERLOCK_MAX_METADATA_BYTES", self.metadata_bytes,
                                        size, "bytes of JSON")

    def fork(self, chat_id: UUID) -> None:
        """Count a fork of `chat_id`; TooManyForksError past INTERLOCK_FORKS_PER_MINUTE."""
        if not self.forks_per_minute:
            return
        at = self._clock()
        with self._lock:
            recent = self._forks.setdefault(chat_id, deque())
            while recent and recent[0] <= at - WINDOW:
                recent.popleft()
            if len(recent) >= self.forks_per_minute:
                raise TooManyForksError(chat_id, self.forks_per_minute,
                                        max(1, int(recent[0] + WINDOW - at + 0.999)))
            recent.append(at)
            if len(self._forks) > MAX_TRACKED:
                self._forget(at)

    def _forget(self, at: float) -> None:
        """Drop the chats whose forks are all older than the window (under the lock)."""
        for chat_id in [c for c, r in self._forks.items() if not r or r[-1] <= at - WINDOW]:
            del self._forks[chat_id]


def _count_keys(value: Any, stop: int) -> int:
    """Keys of every object in `value`, at any depth (counting stops past `stop` + 1)."""
    count, todo = 0, [value]
    while todo and (not stop or count <= stop):
        item = todo.pop()
        if isinstance(item, dict):
            count += len(item)
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return count
