"""Email: held calls mailed to the routed principals with an address in the tenant's email
channel, alone or, with `digest_minutes`, one mail a period; never an action in a mail."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage
from typing import Any

from pydantic import BaseModel

from interlock.domain import Interlock
from interlock.domain.channels import RECORDED, EmailChannel
from interlock.domain.email_address import addr_spec
from interlock.domain.principals import Directory
from interlock.notify import messages
from interlock.notify.channels.port import Asked, Callbacks, UndeliverableError, due
from interlock.notify.config import NotifyConfig
from interlock.notify.store import NotifyStore, Row

KIND = "email"


class Email:
    kind = KIND
    delivery_errors: tuple[type[BaseException], ...] = (smtplib.SMTPException, OSError)

    def __init__(self, config: NotifyConfig) -> None:
        self.config = config

    def rows(self, asked: Asked) -> list[Row]:
        found = asked.channels.configured.get(KIND)
        if found is None:
            return []
        email = EmailChannel.model_validate(found, context=RECORDED)
        told_at = {"version": asked.version}
        mailed = {**told_at, "digest": True} if email.digest_minutes else told_at
        mail_due = due(email.quiet_hours, email.digest_minutes)
        return [Row(f"{asked.position:015d}:email:{p.id}", asked.tenant, KIND, asked.chat_id,
                    asked.ref, email.addresses[p.id], mailed, 0, mail_due or None)
                for p in asked.told if p.id in email.addresses]

    def decided(self, position: int, chat_id: str, ref: str, outcome: str) -> list[Row]:
        return []  # a mail cannot be changed once sent

    def check(self, row: Row) -> None:
        try:
            addr_spec(row.recipient)
        except ValueError as exc:
            raise UndeliverableError(f"bad address: {exc}") from None

    def needs_chat(self, row: Row) -> bool:
        return True

    def batch(self, row: Row) -> str | None:
        return f"{KIND}:{row.recipient}" if row.payload.get("digest") else None

    def send(self, rows: list[Row]) -> dict[str, Any]:
        to, sender = rows[0].recipient, self.config.mail_from
        if len(rows) > 1:
            return self._mail(messages.digest([r.payload for r in rows], to, sender), to)
        return self._mail(messages.email(rows[0].payload, to, sender), to)

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

    def callbacks(self, auth: Directory) -> Callbacks | None:
        return None


class EmailType:
    kind = KIND
    config: type[BaseModel] = EmailChannel
    summary = "Mail held calls to the routed principals with an address here (an event records it)."
    row_kinds: tuple[str, ...] = (KIND,)

    def enabled(self, config: NotifyConfig) -> bool:
        return config.smtp_host is not None

    def open(self, service: Interlock, store: NotifyStore, config: NotifyConfig) -> Email:
        return Email(config)
