"""The sweeper: expires and escalates due approvals, each exactly once, beside the views.

It finds due calls with one indexed query on the inbox (`due_at`), then asks the service
to record each: the chat's optimistic concurrency makes two sweepers, or a sweeper and a
late decision, write one outcome; the loser is told and moves on. A row the inbox has
not yet caught up on is checked against the chat itself, so nothing is expired twice
or early.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from uuid import UUID

from eventsourcing.persistence import PersistenceError

from interlock.domain.chat.rules import SWEEPER
from interlock.domain.errors import InterlockError, InternalError, UnavailableError
from interlock.domain.storage.outages import cause
from interlock.projections.views.inbox import InboxView

if TYPE_CHECKING:
    from interlock.domain import Chat, Interlock
    from interlock.projections.readmodels import SqlReadModels

log = logging.getLogger(__name__)
Pair = tuple[str, str]  # a held call: (chat id, ref)
Outcome = tuple[Pair, str]  # and what was recorded: "expired", "escalated" or ""
MAX_REMEMBERED = 100_000
LAST_RETRY = 30.0  # seconds between passes at most while the store is unavailable


class Sweeper:
    """Records due expiries and escalations; `sweep()` once, or `start()` a thread."""

    def __init__(self, service: Interlock, models: SqlReadModels, *, interval: float = 1.0,
                 batch: int = 500, concurrency: int = 64) -> None:
        self.service, self.models = service, models
        self.interval, self.batch, self.concurrency = interval, batch, concurrency
        # Calls this sweeper has just expired, with the log position of that write: the
        # inbox lists them until it passes it, and they are not loaded again each sweep
        # meanwhile. Anything else (an escalation, a lost race, nothing due) is looked at
        # again: it may still come due however far behind the inbox is.
        self._recorded: dict[Pair, int] = {}
        self._refused: set[tuple[UUID, str]] = set()
        self._stopping = threading.Event()
        self._revive = threading.Event()  # the store answers again: sweep now
        self._failing_since: float | None = None
        self._thread = threading.Thread(target=self._loop, name="interlock-sweeper", daemon=True)

    def sweep(self, now: datetime | None = None, limit: int | None = None) -> int:
        """Record what is due at `now` (at most `limit` calls), and continue the turns of this
        process's agents that a sweeper without them ended; how many events it wrote.

        Due calls are read in keyset pages, so a row the views have not yet removed (its
        expiry just recorded) is looked at once per sweep, not once per page.
        """
        inbox, at = self.models.view(InboxView), now or datetime.now(UTC)
        if self._recorded:
            seen_upto = inbox.position()
            self._recorded = {k: v for k, v in self._recorded.items() if v > seen_upto}
            if len(self._recorded) > MAX_REMEMBERED:  # a view stuck for long: look again
                self._recorded.clear()
        waiting = inbox.awaiting(sorted(self.service.agents), self.batch)
        written, seen, after = 0, 0, None
        while limit is None or seen < limit:
            size = self.batch if limit is None else min(self.batch, limit - seen)
            due = inbox.due(at, size, after)
            if not (due or waiting):
                break
            fresh = [(c, r) for _, c, r in due if (c, r) not in self._recorded]
            outcomes, went_on = asyncio.run(self._record(fresh, waiting, now))
            written += went_on + sum(1 for _, did in outcomes if did)
            expired = [pair for pair, did in outcomes if did == "expired"]
            if expired:
                upto = self.service.position()
                self._recorded.update(dict.fromkeys(expired, upto))
            waiting, seen = [], seen + len(due)
            if len(due) < size:
                break
            after = due[-1]
        return written

    async def _record(self, due: list[Pair], waiting: list[str],
                      at: datetime | None) -> tuple[list[Outcome], int]:
        """Up to `concurrency` chats at once: their commits share transactions (group commit).

        The page's chats are read together (one query on PostgreSQL); refs of one chat go
        one after the other: together they would only conflict. What each due call had
        recorded, and how many waiting turns went on. `at`: the sweep's given clock (None:
        each call is judged at the time it is recorded).
        """
        gate, refs = asyncio.Semaphore(self.concurrency), defaultdict(list)
        for chat_id, ref in due:
            refs[UUID(chat_id)].append(ref)
        turns = self.service.turns
        loaded = await turns.read(list(refs))
        done, went_on = await turns.batch(asyncio.gather(
            asyncio.gather(*(self._chat(gate, c, rs, loaded.get(c), at)
                           for c, rs in refs.items())),
            asyncio.gather(*(self._go_on(gate, UUID(c)) for c in waiting))))
        return [outcome for outcomes in done for outcome in outcomes], sum(went_on)

    async def _chat(self, gate: asyncio.Semaphore, chat_id: UUID, refs: list[str],
                    chat: Chat | None, at: datetime | None) -> list[Outcome]:
        """What each of the chat's due refs recorded (the first from `chat`)."""
        async with gate:
            done = [await self._one(chat_id, refs[0], chat, at)]
            done += [await self._one(chat_id, ref, None, at) for ref in refs[1:]]
            return [((str(chat_id), ref), did) for ref, did in zip(refs, done, strict=True)]

    async def _go_on(self, gate: asyncio.Semaphore, chat_id: UUID) -> int:
        """Continue a turn ended for want of its agent: the model is told of the expiry."""
        async with gate:
            try:
                await self.service.retry(chat_id, actor=SWEEPER)
            except InterlockError as exc:  # a client's retry or another sweeper went first
                log.debug("sweeper did not continue %s: %s", chat_id, exc.code)
                return 0
            return 1

    async def _one(self, chat_id: UUID, ref: str, chat: Chat | None = None,
                   at: datetime | None = None) -> str:
        """What was recorded: "expired", "escalated", or "" (nothing due, or lost a race)."""
        try:
            return await self.service.expire_due(chat_id, ref, chat, at=at)
        except InternalError as exc:  # the chat does not load (an edited record, say)
            level = logging.DEBUG if (chat_id, ref) in self._refused else logging.WARNING
            self._refused.add((chat_id, ref))  # said once per process, retried each sweep
            log.log(level, "sweeper cannot expire %s %s: %s", chat_id, ref, exc)
            return ""
        except InterlockError as exc:  # a decision or another sweeper won: theirs stands
            if self._erased(chat_id):
                return await self._expire_erased(chat_id, ref, at)
            log.debug("sweeper skipped %s %s: %s", chat_id, ref, exc.code)
            return ""

    def _erased(self, chat_id: UUID) -> bool:
        """Whether the chat's key was destroyed (a chat kept in plaintext never is)."""
        return self.service.keys.erased(chat_id)

    async def _expire_erased(self, chat_id: UUID, ref: str, at: datetime | None) -> str:
        """An erased chat takes nothing with personal data, so its turn cannot go on (the
        model's answer, even `TurnFinished`, has such fields): record the expiry alone, which
        has none, and the inbox lets the call go (issue 25, D31)."""
        try:
            return await self.service.turns.expire_erased(chat_id, ref, at or datetime.now(UTC))
        except InterlockError as exc:
            log.debug("sweeper skipped erased %s %s: %s", chat_id, ref, exc.code)
            return ""

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        delay = self.interval
        while not self._stopping.is_set():
            if self._revive.wait(delay):
                self._revive.clear()
            if self._stopping.is_set():
                return
            delay = self.interval if self._pass() else min(LAST_RETRY, delay * 2)

    def _pass(self) -> bool:
        """One sweep; False while the store is unavailable (the loop backs off)."""
        try:
            self.sweep()
        except (UnavailableError, PersistenceError) as exc:
            if self._failing_since is None:  # one line when it begins, one when it ends
                self._failing_since = time.monotonic()
                log.warning("sweeper paused: the store is unavailable, %s; backing off",
                            cause(exc))
            return False
        except Exception:  # broad on purpose: the next pass must still come
            log.exception("sweeper pass failed; retrying")
        if self._failing_since is not None:
            log.warning("sweeper resumed: sweeping again after %.1fs",
                        time.monotonic() - self._failing_since)
            self._failing_since = None
        return True

    @property
    def failing(self) -> bool:
        """True while passes fail for want of the store."""
        return self._failing_since is not None

    def store_changed(self, up: bool) -> None:
        """The store answers again: end the backoff now."""
        if up:
            self._revive.set()

    def stop(self) -> None:
        self._stopping.set()
        self._revive.set()
        if self._thread.is_alive():
            self._thread.join()
