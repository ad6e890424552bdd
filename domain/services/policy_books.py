"""The tenants' data policy books as holds read them: kept in memory where the store can
guard them, read afresh at each hold elsewhere.

A hold judges a new call by the tenant's data policy in force when it is asked. Reading the
tenant's policy stream at every hold cost a served cycle a store read and a thread hop (0.39 M
instructions). On a store whose append can be refused by another stream's version
(PostgreSQL: `ChatRepository.guards_supported`), the book is kept: a hold that used it adds a
guard to the chat (the policy stream, its next version), so the commit that records the hold
is refused if any process appended a policy event since the book was read. The turn service
then forgets the book and asks again (domain/services/turns.py). This process's own policy
commits drop the kept book at once (`heard`, a commit listener).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Recording

from interlock.domain.policy_book import PolicyBook, load, policies_id

Guard = tuple[UUID, int]  # (stream, version): refused if the stream holds that version


class PolicyBooks:
    def __init__(self, events: Any, guarded: bool) -> None:
        """`events`: the application's event store; `guarded`: its appends take guards."""
        self._events, self.guarded = events, guarded
        self._kept: dict[UUID, PolicyBook] = {}  # by policy stream id
        self._lock = threading.Lock()

    def kept(self, tenant: str) -> tuple[PolicyBook, Guard] | None:
        """The tenant's kept book and its guard, if one is kept (no store read)."""
        if not self._kept:
            return None
        kept = self._kept.get(stream := policies_id(tenant))
        return None if kept is None else (kept, (stream, kept.version + 1))

    def book(self, tenant: str) -> tuple[PolicyBook, Guard | None]:
        """The tenant's book read now (kept where guarded), and the guard the commit of a
        hold judged by it carries."""
        book = load(self._events, tenant)
        if not self.guarded:
            return book, None
        with self._lock:  # two threads may have read it: the newer is kept
            kept = self._kept.get(book.id)
            if kept is None or kept.version < book.version:
                self._kept[book.id] = kept = book
        return kept, (kept.id, kept.version + 1)

    def heard(self, recordings: Sequence[Recording[UUID]]) -> None:
        """A commit of this process: a kept book whose stream it wrote is read again."""
        if self._kept:
            for recording in recordings:
                if recording.domain_event.originator_id in self._kept:
                    self._kept.pop(recording.domain_event.originator_id, None)

    def current(self, guards: Sequence[Guard]) -> bool:
        """Whether no guarded stream holds its guarded version yet: the books a hold was
        judged by are still the ones in force. Those that are not are forgotten."""
        stale = [stream for stream, version in guards if self._holds(stream, version)]
        for stream in stale:
            self._kept.pop(stream, None)
        return not stale

    def moved(self, guards: Sequence[Guard]) -> bool:
        """Whether a guarded stream holds its guarded version now (a refusal was theirs):
        their kept books are forgotten either way."""
        moved = False
        for stream, version in guards:
            self._kept.pop(stream, None)
            moved = moved or self._holds(stream, version)
        return moved

    def _holds(self, stream: UUID, version: int) -> bool:
        """Whether `stream` holds an event at `version` (or later) now."""
        return bool(list(self._events.get(stream, gt=version - 1, limit=1)))
