"""The notifier: reads held calls and their endings from the log (its place kept in the
store), queues one outbox row per channel and routed recipient, and delivers the due rows
with retries. A restart goes on from the kept place: a row is queued once (its id is the
event's position, the channel and the recipient) and sent until it is marked sent."""

from __future__ import annotations

import logging
import math
import smtplib
import threading
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
from interlock.domain.errors import InterlockError
from interlock.notify import messages
from interlock.notify.config import NotifyConfig
from interlock.notify.routing import routed
from interlock.notify.store import NotifyStore, Row

log = logging.getLogger("interlock.notify")
TOPICS = [f"interlock:{c.__name__}" for c in (
    ApprovalRequested, ApprovalVoted, InterruptExpired, InterruptWithdrawn)]
PAGE = 500


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
            except InterlockError as exc:  # erased or refused: nobody can be told of it
                log.warning("notification of event %d skipped: %s", note.id, exc.code)
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
        facts = messages.facts(call, str(chat.id), tenant, self.config.console_url)
        rows: list[Row] = []
        email, slack = channels.email(), channels.slack()
        mailed = {**facts, "digest": True} if email and email.digest_minutes else facts
        mail_due = email and due(email.quiet_hours, email.digest_minutes)
        slack_due = slack and due(slack.quiet_hours, None)
        for p in told:
            if email is not None and p.id in email.addresses:
                rows.append(Row(f"{position:015d}:email:{p.id}", tenant, "email", str(chat.id),
                                call.ref, email.addresses[p.id], mailed, 0, mail_due or None))
            for user, principal in sorted((channels.linked() if slack else {}).items()):
                if principal == p.id:
                    rows.append(Row(f"{position:015d}:slack:{user}", tenant, "slack",
                                    str(chat.id), call.ref, user, facts, 0, slack_due or None))
        return rows

    # -- delivering --------------------------------------------------------------------------

    def deliver_due(self) -> int:
        """Send the due rows (a digest's rows to one address as one mail); how many."""
        sent = 0
        for batch in _batches(self.store.due()):
            try:
                receipt = self._digest(batch) if len(batch) > 1 else self._send(batch[0])
            except (smtplib.SMTPException, OSError, SlackClientError) as exc:
                for row in batch:
                    if self.store.failed(row, self.config.max_attempts):
                        log.error("notification %s given up: %s", row.id, type(exc).__name__)
                continue
            for row in batch:
                self.store.sent(row, receipt)
            sent += len(batch)
        return sent

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
            return {"channel": answer["channel"], "ts": answer["ts"], "facts": row.payload}
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
            try:
                self.run_once()
            except (PersistenceError, InterlockError) as exc:  # the store is away: say once
                if not self.failing:
                    log.warning("notifications paused: %s", type(exc).__name__)
                self.failing = True
                continue
            if self.failing:
                log.warning("notifications resumed")
            self.failing = False
