"""The notifier: reads held calls and their endings from the log (its place kept in the
store), queues one outbox row per channel and routed recipient, and delivers the due rows
with retries. A restart goes on from the kept place: a row is queued once (its id is the
event's position, the channel and the recipient) and sent until it is marked sent."""

from __future__ import annotations

import logging
import math
import smtplib
import sqlite3
import threading
from dataclasses import replace
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any
from uuid import UUID

from eventsourcing.persistence import PersistenceError
from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

from interlock.api.auth import AuthConfig
from interlock.domain import Interlock
from interlock.domain.channels import QuietHours
from interlock.domain.chat.approval_events import (
    ApprovalRequested,
    ApprovalVoted,
    InterruptExpired,
    InterruptWithdrawn,
)
from interlock.domain.chat.events import ChatEvent
from interlock.domain.email_address import addr_spec
from interlock.domain.errors import InterlockError, UnavailableError
from interlock.domain.storage.outages import cause
from interlock.notify import messages
from interlock.notify.config import NotifyConfig
from interlock.notify.routing import routed
from interlock.notify.store import NotifyStore, Row
from interlock.stores.erasure_keys import KeyStore

log = logging.getLogger("interlock.notify")
TOPICS = [f"interlock:{c.__name__}" for c in (
    ApprovalRequested, ApprovalVoted, InterruptExpired, InterruptWithdrawn)]
PAGE = 500
# A send that failed on the way (mail server, network, Slack): tried again, with backoff.
DELIVERY_ERRORS = (smtplib.SMTPException, OSError, SlackClientError)
STORE_ERRORS = (PersistenceError, UnavailableError, sqlite3.Error)  # the store is away: pause


class UndeliverableError(Exception):
    """A row that can never be sent as it is (a malformed address, its call not found):
    given up at once, counted, and the rows after it go on."""


def ending(event: ChatEvent) -> str | None:
    """What became of a held call, in words, when `event` ends it."""
    if isinstance(event, ApprovalVoted) and event.outcome != "pending":
        return f"{event.outcome} ({event.vote} by {event.actor})"
    if isinstance(event, InterruptExpired):
        return "expired: the deadline passed"
    if isinstance(event, InterruptWithdrawn):
        return f"withdrawn by {event.actor}"
    return None


def due(quiet: QuietHours | None, digest_minutes: int | None) -> float | None:
    """When a notification asked now may be sent: at the end of its digest's period, and
    never inside quiet hours (then when they end); None: now."""
    at = datetime.now(UTC)
    if digest_minutes:
        period = digest_minutes * 60
        at = datetime.fromtimestamp(math.ceil(at.timestamp() / period) * period, UTC)
    until = quiet.until(at) if quiet is not None else None
    at = until or at
    return at.timestamp() if (digest_minutes or until) else None


def _batches(rows: list[Row]) -> list[list[Row]]:
    """Digest mails to one address go together; every other row alone."""
    digests: dict[str, list[Row]] = {}
    alone: list[list[Row]] = []
    for row in rows:
        if row.kind == "email" and row.payload.get("digest"):
            digests.setdefault(row.recipient, []).append(row)
        else:
            alone.append([row])
    return [*digests.values(), *alone]


class Notifier:
    """Queues and delivers notifications for one service; `run_once` is one whole pass."""

    def __init__(self, service: Interlock, auth: AuthConfig, config: NotifyConfig,
                 store: NotifyStore | None = None) -> None:
        self.service, self.auth, self.config = service, auth, config
        self.store = store or NotifyStore(service)
        self.slack = WebClient(token=config.slack_token, base_url=config.slack_base_url,
                               timeout=10) if config.slack_token else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failing = False

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
        tenant = self.store.tenant_told(chat_id, ref)
        if tenant is None:  # nobody was told on Slack: nothing to update, no chat to load
            return []
        return [Row(f"{position:015d}:update", tenant, "slack_update", chat_id, ref, "",
                    {"outcome": outcome}, 0)]

    def _asked(self, position: int, event: ApprovalRequested) -> list[Row]:
        chat = self.service.get_chat(event.originator_id, version=event.originator_version)
        call, tenant = chat.state.calls[event.ref], chat.state.tenant
        if call.approval is None:
            return []
        told = routed(call.approval, call.approval.terms.requested_by, self.auth, tenant)
        channels = self.service.get_channels(tenant)
        told_at = {"version": event.originator_version}  # what is said: read when it is sent
        rows: list[Row] = []
        email, slack = channels.email(), channels.slack()
        mailed = {**told_at, "digest": True} if email and email.digest_minutes else told_at
        mail_due = email and due(email.quiet_hours, email.digest_minutes)
        slack_due = slack and due(slack.quiet_hours, None)
        for p in told:
            if email is not None and p.id in email.addresses:
                rows.append(Row(f"{position:015d}:email:{p.id}", tenant, "email", str(chat.id),
                                call.ref, email.addresses[p.id], mailed, 0, mail_due or None))
            for user, principal in sorted((channels.linked() if slack else {}).items()):
                if principal == p.id:
                    rows.append(Row(f"{position:015d}:slack:{user}", tenant, "slack",
                                    str(chat.id), call.ref, user, told_at, 0,
                                    slack_due or None))
        return rows

    # -- delivering --------------------------------------------------------------------------

    def deliver_due(self) -> int:
        """Send the due rows (a digest's rows to one address as one mail); how many. Each
        row fails on its own (retried, or given up): it never stops the rows after it."""
        sent = 0
        for batch in _batches(self._ready(self.store.due())):
            sent += self._deliver(batch)
        return sent

    def _ready(self, rows: list[Row]) -> list[Row]:
        """The rows with what they say, read now from their chat; a row of an erased chat
        is marked erased, one that cannot be read given up (each logged, none sent)."""
        ready = []
        for row in rows:
            try:
                facts = self._said(row)
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
                ready.append(replace(row, payload=facts))
        return ready

    def _said(self, row: Row) -> dict[str, Any] | None:
        """What the row tells, as its chat says it now; None once the chat is erased."""
        if row.kind == "slack_update":  # an outcome: no personal data
            return row.payload
        if self._erased(row.chat_id):
            return None
        if row.kind == "email":
            try:
                addr_spec(row.recipient)
            except ValueError as exc:
                raise UndeliverableError(f"bad address: {exc}") from None
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

    def _deliver(self, batch: list[Row]) -> int:
        """Send one batch; how many rows it sent (none when it failed: retried later)."""
        try:
            receipt = self._digest(batch) if len(batch) > 1 else self._send(batch[0])
        except STORE_ERRORS:
            raise
        except DELIVERY_ERRORS as exc:
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

    def _digest(self, rows: list[Row]) -> dict[str, Any]:
        c = self.config
        return self._mail(messages.digest(
            [r.payload for r in rows], rows[0].recipient, c.mail_from), rows[0].recipient)

    def _send(self, row: Row) -> dict[str, Any]:
        if row.kind == "email":
            return self._email(row)
        if self.slack is None:
            raise SlackClientError("no Slack token is configured (INTERLOCK_SLACK_TOKEN)")
        if row.kind == "slack":
            if not self._still_pending(row):
                return {"skipped": "decided before it was sent"}
            answer = self.slack.chat_postMessage(channel=row.recipient, text=messages.summary(
                row.payload), blocks=messages.slack_blocks(row.payload))
            told = {k: v for k, v in row.payload.items() if k != "input"}  # kept: no input
            return {"channel": answer["channel"], "ts": answer["ts"], "facts": told}
        for kept in self.store.receipts(row.chat_id, row.ref):
            if "ts" in kept:
                self.slack.chat_update(channel=kept["channel"], ts=kept["ts"],
                                       text=row.payload["outcome"], blocks=messages.slack_decided(
                                           kept["facts"], row.payload["outcome"]))
        return {"updated": True}

    def _still_pending(self, row: Row) -> bool:
        chat = self.service.get_chat(UUID(row.chat_id))
        return any(c.ref == row.ref for c in chat.pending_interrupts())

    def _email(self, row: Row) -> dict[str, Any]:
        return self._mail(messages.email(row.payload, row.recipient, self.config.mail_from),
                          row.recipient)

    def _mail(self, message: EmailMessage, to: str) -> dict[str, Any]:
        c = self.config
        if c.smtp_host is None:
            raise smtplib.SMTPException("no SMTP host is configured (INTERLOCK_SMTP_HOST)")
        with smtplib.SMTP(c.smtp_host, c.smtp_port, timeout=10) as smtp:
            if c.smtp_starttls:
                smtp.starttls()
            if c.smtp_user:
                smtp.login(c.smtp_user, c.smtp_password or "")
            smtp.send_message(message)
        return {"to": to}

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
