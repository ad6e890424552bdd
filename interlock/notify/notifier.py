"""The notifier: reads held calls and their endings from the log (its place kept in the
store), queues one outbox row per channel and routed recipient, and delivers the due rows
with retries. A restart goes on from the kept place: a row is queued once (its id is the
event's position, the channel and the recipient) and sent until it is marked sent."""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import replace
from typing import Any
from uuid import UUID

from eventsourcing.persistence import PersistenceError

from interlock.domain import Interlock
from interlock.domain.chat.approval_events import (
    ApprovalRequested,
    ApprovalVoted,
    InterruptExpired,
    InterruptWithdrawn,
)
from interlock.domain.chat.events import ChatEvent
from interlock.domain.errors import InterlockError, UnavailableError
from interlock.domain.principals import Directory
from interlock.domain.storage.outages import cause
from interlock.notify import messages
from interlock.notify.channels.port import Asked, Callbacks, Channel, UndeliverableError
from interlock.notify.channels.registry import CHANNELS
from interlock.notify.config import NotifyConfig
from interlock.notify.routing import routed
from interlock.notify.store import NotifyStore, Row
from interlock.stores.erasure_keys import KeyStore

log = logging.getLogger("interlock.notify")
TOPICS = [f"interlock:{c.__name__}" for c in (
    ApprovalRequested, ApprovalVoted, InterruptExpired, InterruptWithdrawn)]
PAGE = 500
STORE_ERRORS = (PersistenceError, UnavailableError, sqlite3.Error)  # the store is away: pause


def ending(event: ChatEvent) -> str | None:
    """What became of a held call, in words, when `event` ends it."""
    if isinstance(event, ApprovalVoted) and event.outcome != "pending":
        return f"{event.outcome} ({event.vote} by {event.actor})"
    if isinstance(event, InterruptExpired):
        return "expired: the deadline passed"
    if isinstance(event, InterruptWithdrawn):
        return f"withdrawn by {event.actor}"
    return None


def _batches(rows: list[tuple[Channel, Row]]) -> list[tuple[Channel, list[Row]]]:
    """A digest's rows (to one address) go together; every other row alone."""
    digests: dict[str, tuple[Channel, list[Row]]] = {}
    alone: list[tuple[Channel, list[Row]]] = []
    for channel, row in rows:
        key = channel.batch(row)
        if key is not None:
            digests.setdefault(key, (channel, []))[1].append(row)
        else:
            alone.append((channel, [row]))
    return [*digests.values(), *alone]


class Notifier:
    """Queues and delivers notifications for one service; `run_once` is one whole pass."""

    def __init__(self, service: Interlock, auth: Directory, config: NotifyConfig,
                 store: NotifyStore | None = None) -> None:
        self.service, self.auth = service, auth
        self.store = store or NotifyStore(service)
        self.config = config
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failing = False

    @property
    def config(self) -> NotifyConfig:
        return self._config

    @config.setter
    def config(self, config: NotifyConfig) -> None:
        """The settings, and the channels opened with them (again, when they change)."""
        self._config = config
        self.channels = [t.open(self.service, self.store, config) for t in CHANNELS]
        self._by_row = {k: c for t, c in zip(CHANNELS, self.channels, strict=True)
                        for k in t.row_kinds}
        # A send that failed on the way (mail server, network, Slack): tried again, later.
        self.delivery_errors = tuple({e for c in self.channels for e in c.delivery_errors})

    # -- queueing ----------------------------------------------------------------------------

    def queue_new(self) -> int:
        """Queue what the log holds past this notifier's place; how many rows."""
        start = self.store.position()
        notes = self.service.recorder.select_notifications(
            start, PAGE, topics=TOPICS, inclusive_of_start=False)
        queued = 0
        for note in notes:
            try:
                event = self.service.mapper.to_domain_event(note)
                rows = self._rows(note.id, event)
            except STORE_ERRORS:
                raise  # nothing is skipped for want of the store: the pass pauses
            except (InterlockError, ValueError) as exc:  # refused, or settings it cannot read
                log.warning("notification of event %d skipped: %s", note.id,
                            type(exc).__name__)
                continue
            self.store.queue(rows)
            queued += len(rows)
        if notes:
            self.store.move_to(notes[-1].id)
        return queued

    def _rows(self, position: int, event: ChatEvent) -> list[Row]:
        if isinstance(event, ApprovalRequested):
            return self._asked(position, event)
        outcome = ending(event)
        if outcome is None:
            return []
        chat_id, ref = str(event.originator_id), str(getattr(event, "ref", ""))
        return [row for c in self.channels for row in c.decided(position, chat_id, ref, outcome)]

    def _asked(self, position: int, event: ApprovalRequested) -> list[Row]:
        chat = self.service.get_chat(event.originator_id, version=event.originator_version)
        call, tenant = chat.state.calls[event.ref], chat.state.tenant
        if call.approval is None:
            return []
        told = routed(call.approval, call.approval.terms.requested_by, self.auth, tenant)
        asked = Asked(position, event.originator_version, tenant, str(chat.id), call.ref, told,
                      self.service.channels.get(tenant))
        return [row for c in self.channels for row in c.rows(asked)]

    def callbacks(self) -> dict[str, Callbacks]:
        """Each channel's handler of its signed callbacks, by kind, for those that take any."""
        found = {c.kind: c.callbacks(self.auth) for c in self.channels}
        return {kind: handler for kind, handler in found.items() if handler is not None}

    # -- delivering --------------------------------------------------------------------------

    def deliver_due(self) -> int:
        """Send the due rows (a digest's rows to one address as one mail); how many. Each
        row fails on its own (retried, or given up): it never stops the rows after it."""
        sent = 0
        for channel, batch in _batches(self._ready(self.store.due())):
            sent += self._deliver(channel, batch)
        return sent

    def _ready(self, rows: list[Row]) -> list[tuple[Channel, Row]]:
        """The rows with what they say, read now from their chat; a row of an erased chat
        is marked erased, one that cannot be read given up (each logged, none sent)."""
        ready = []
        for row in rows:
            try:
                channel = self._channel(row)
                facts = self._said(channel, row)
            except STORE_ERRORS:
                raise
            except (UndeliverableError, InterlockError) as exc:
                self._failed([row], exc, for_good=True)
                continue
            except Exception as exc:  # broad on purpose: one row's bug must not stop the rest
                log.exception("notification %s could not be made", row.id)
                self._failed([row], exc)
                continue
            if facts is None:
                self.store.erased(row)
                log.info("notification %s not sent: its chat was erased", row.id)
            else:
                ready.append((channel, replace(row, payload=facts)))
        return ready

    def _channel(self, row: Row) -> Channel:
        found = self._by_row.get(row.kind)
        if found is None:
            raise UndeliverableError(f"no channel sends {row.kind!r} rows")
        return found

    def _said(self, channel: Channel, row: Row) -> dict[str, Any] | None:
        """What the row tells, as its chat says it now; None once the chat is erased."""
        if not channel.needs_chat(row):  # an outcome: no personal data
            return row.payload
        if self._erased(row.chat_id):
            return None
        channel.check(row)
        if "version" not in row.payload:
            return row.payload  # queued by an older version, with its facts
        chat = self.service.get_chat(UUID(row.chat_id), version=int(row.payload["version"]))
        call = chat.state.calls.get(row.ref)
        if call is None:
            raise UndeliverableError(f"chat {row.chat_id} has no call {row.ref}")
        facts = messages.facts(call, row.chat_id, row.tenant, self.config.console_url)
        return {**facts, "digest": True} if row.payload.get("digest") else facts

    def _erased(self, chat_id: str) -> bool:
        """Asked of the key store itself (not a cache): a chat erased is never told of."""
        keys = getattr(self.service.mapper, "personal", None)
        return isinstance(keys, KeyStore) and keys.erased_at(UUID(chat_id)) is not None

    def _deliver(self, channel: Channel, batch: list[Row]) -> int:
        """Send one batch; how many rows it sent (none when it failed: retried later)."""
        try:
            receipt = channel.send(batch)
        except STORE_ERRORS:
            raise
        except self.delivery_errors as exc:
            self._failed(batch, exc)
            return 0
        except (InterlockError, ValueError) as exc:  # e.g. a header the row cannot make
            self._failed(batch, exc, for_good=True)
            return 0
        except Exception as exc:  # broad on purpose: one row's bug must not stop the rest
            log.exception("notification %s failed unexpectedly", batch[0].id)
            self._failed(batch, exc)
            return 0
        for row in batch:
            self.store.sent(row, receipt)
        return len(batch)

    def _failed(self, rows: list[Row], exc: BaseException, *, for_good: bool = False) -> None:
        for row in rows:
            if self.store.failed(row, self.config.max_attempts, for_good=for_good):
                log.error("notification %s given up: %s", row.id, type(exc).__name__)

    # -- running -----------------------------------------------------------------------------

    def run_once(self) -> tuple[int, int]:
        return self.queue_new(), self.deliver_due()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="interlock-notify", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.config.poll_interval):
            self._pass()

    def _pass(self) -> None:
        """One run of the thread: the store away pauses it (said once), a bug is logged;
        either way the thread goes on."""
        try:
            self.run_once()
        except STORE_ERRORS as exc:
            if not self.failing:
                log.warning("notifications paused: the store is unavailable, %s; retrying",
                            cause(exc))
            self.failing = True
            return
        except Exception:  # broad on purpose: a bug must not stop every later notification
            log.exception("notification pass failed unexpectedly; retrying")
            return
        if self.failing:
            log.warning("notifications resumed")
        self.failing = False
