"""A 503 can follow a commit: the store recorded a resume's decisions, then failed the
turn's next step (or lost the commit's answer), so the client saw `store_unavailable`
for a request that was in part recorded. Its retry with the same `Idempotency-Key` must
answer that request's result, not `409 turn_in_progress` for a turn nobody runs.

`CutTurns` remembers, in this process, the resumes whose turn stopped at a store
failure; a retry of one continues its turn at once (the run as `retry` does: completed
tools never run again, a requested one runs with its idempotency key). A retry that
reaches another process continues the turn once its lease lapsed (a crashed process's
turn, `ABANDONED_AFTER`); until then the turn may still run somewhere: 409.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from uuid import UUID

from interlock.domain.chat.aggregate import Chat

MAX_REMEMBERED = 10_000  # an outage's cut turns; older ones fall back on the lease


class CutTurns:
    """Resumes, by chat and Idempotency-Key, whose turn this process stopped at a store failure."""

    def __init__(self) -> None:
        self._cut: dict[tuple[UUID, str], None] = {}
        self._lock = threading.Lock()

    def cut(self, chat_id: UUID, key: str) -> None:
        """The resume under `key` failed on the store after it may have committed."""
        with self._lock:
            self._cut[(chat_id, key)] = None
            while len(self._cut) > MAX_REMEMBERED:
                del self._cut[next(iter(self._cut))]

    def may_continue(self, chat: Chat, key: str, at: datetime, stale_after: timedelta) -> bool:
        """Whether a retry under `key` may continue the chat's unfinished turn (once)."""
        if chat.state.status != "running":
            return False
        with self._lock:
            if self._cut.pop((chat.id, key), 0) is None:
                return True
        return at - chat.state.updated_at >= stale_after
