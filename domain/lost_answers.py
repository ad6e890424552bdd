"""A 503 can follow a commit: the store recorded a resume's decisions, then failed the
turn's next step (or lost the commit's answer), so the client saw `store_unavailable`
for a request that was in part recorded. Its retry with the same `Idempotency-Key` must
answer that request's result, not `409 turn_in_progress` for a turn nobody runs.

`CutTurns` remembers, in this process, the resumes and starts whose turn stopped at a
store failure, and what the chat's last event is if their writes were the last. A retry
of one continues its turn at once (the run as `retry` does: completed tools never run
again, a requested one runs with its idempotency key) if the chat still ends with that
event: nobody wrote since, so nobody else runs the turn. Otherwise (another process took
the chat up meanwhile, or the retry reaches a process that did not see the cut) it
continues the turn once its lease lapsed (a crashed process's turn, `ABANDONED_AFTER`);
until then the turn may still run somewhere: 409.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from uuid import UUID

from interlock.domain.chat.aggregate import Chat

MAX_REMEMBERED = 10_000  # an outage's cut turns; older ones fall back on the lease


class CutTurns:
    """Turns, by chat and Idempotency-Key, this process stopped at a store failure, each
    with what the chat's last event is if this process's writes are the last ones."""

    def __init__(self) -> None:
        self._cut: dict[tuple[UUID, str], frozenset[tuple[int, str]]] = {}
        self._lock = threading.Lock()

    def cut(self, chat: Chat, key: str, since: int) -> None:
        """The command under `key` failed on the store, `chat` as it left it (begun at
        version `since`). Kept: the last event of each write of its whose outcome is
        unknown (a commit that failed) or known (its last commit); none, nothing kept."""
        marks = set()
        stored = chat.version - len(chat.pending_events)
        if stored > since and chat.state.chain_tip is not None:
            marks.add((stored, chat.state.chain_tip))
        last = chat.pending_events[-1] if chat.pending_events else None
        sealed: str | None = getattr(last, "chain", None)  # sealed: sent in a commit
        if last is not None and sealed is not None:
            marks.add((last.originator_version, sealed))
        if not marks:  # it wrote nothing: a retry starts afresh, or waits for the lease
            return
        with self._lock:
            self._cut[(chat.id, key)] = frozenset(marks)
            while len(self._cut) > MAX_REMEMBERED:
                del self._cut[next(iter(self._cut))]

    def may_continue(self, chat: Chat, key: str, at: datetime, stale_after: timedelta) -> bool:
        """Whether a retry under `key` may continue the chat's unfinished turn (once): at
        once if the chat's last event is this process's own cut write (nobody wrote since),
        else once the turn's lease lapsed."""
        if chat.state.status != "running":
            return False
        with self._lock:
            marks = self._cut.pop((chat.id, key), None)
        if marks is not None and (chat.version, chat.state.chain_tip) in marks:
            return True
        return at - chat.state.updated_at >= stale_after
