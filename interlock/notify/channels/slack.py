"""Slack: held calls sent as direct messages to the routed principals' linked Slack users,
with buttons that vote (slack_actions.py takes them); each message is updated once the call
is decided, wherever it was."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel
from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

from interlock.domain import Interlock
from interlock.domain.channels import SlackChannel
from interlock.domain.principals import Directory
from interlock.notify import messages
from interlock.notify.channels.port import Asked, Callbacks, due
from interlock.notify.config import NotifyConfig
from interlock.notify.slack_actions import SlackActions
from interlock.notify.store import NotifyStore, Row

KIND = "slack"
UPDATE = "slack_update"  # the row that updates a call's messages once it is decided


class Slack:
    kind = KIND
    delivery_errors: tuple[type[BaseException], ...] = (OSError, SlackClientError)

    def __init__(self, service: Interlock, store: NotifyStore, config: NotifyConfig) -> None:
        self.service, self.store, self.config = service, store, config
        self.client = WebClient(token=config.slack_token, base_url=config.slack_base_url,
                                timeout=10) if config.slack_token else None

    def rows(self, asked: Asked) -> list[Row]:
        found = asked.channels.configured.get(KIND)
        if found is None:
            return []
        slack = SlackChannel.model_validate({k: v for k, v in found.items() if k != "users"})
        slack_due = due(slack.quiet_hours, None)
        linked = sorted(asked.channels.linked().items())
        return [Row(f"{asked.position:015d}:slack:{user}", asked.tenant, KIND, asked.chat_id,
                    asked.ref, user, {"version": asked.version}, 0, slack_due or None)
                for p in asked.told for user, principal in linked if principal == p.id]

    def decided(self, position: int, chat_id: str, ref: str, outcome: str) -> list[Row]:
        tenant = self.store.tenant_told(chat_id, ref, KIND)
        if tenant is None:  # nobody was told on Slack: nothing to update, no chat to load
            return []
        return [Row(f"{position:015d}:update", tenant, UPDATE, chat_id, ref, "",
                    {"outcome": outcome}, 0)]

    def check(self, row: Row) -> None:
        return None

    def needs_chat(self, row: Row) -> bool:
        return row.kind != UPDATE  # an outcome: no personal data

    def batch(self, row: Row) -> str | None:
        return None

    def send(self, rows: list[Row]) -> dict[str, Any]:
        [row] = rows
        if self.client is None:
            raise SlackClientError("no Slack token is configured (INTERLOCK_SLACK_TOKEN)")
        if row.kind == KIND:
            if not self._still_pending(row):
                return {"skipped": "decided before it was sent"}
            answer = self.client.chat_postMessage(channel=row.recipient, text=messages.summary(
                row.payload), blocks=messages.slack_blocks(row.payload))
            told = {k: v for k, v in row.payload.items() if k != "input"}  # kept: no input
            return {"channel": answer["channel"], "ts": answer["ts"], "facts": told}
        for kept in self.store.receipts(row.chat_id, row.ref, KIND):
            if "ts" in kept:
                self.client.chat_update(channel=kept["channel"], ts=kept["ts"],
                                        text=row.payload["outcome"], blocks=messages.slack_decided(
                                            kept["facts"], row.payload["outcome"]))
        return {"updated": True}

    def _still_pending(self, row: Row) -> bool:
        chat = self.service.get_chat(UUID(row.chat_id))
        return any(c.ref == row.ref for c in chat.pending_interrupts())

    def callbacks(self, auth: Directory) -> Callbacks | None:
        """Slack's callbacks are taken only with a signing secret to check them by."""
        secret = self.config.slack_signing_secret
        if secret is None:
            return None
        return SlackActions(self.service, auth, secret, self.store, self.client,
                            self.config.console_url)


class SlackType:
    kind = KIND
    config: type[BaseModel] = SlackChannel
    summary = "Message held calls to the routed principals' Slack users, and take their votes."
    row_kinds: tuple[str, ...] = (KIND, UPDATE)

    def enabled(self, config: NotifyConfig) -> bool:
        return config.slack_token is not None

    def open(self, service: Interlock, store: NotifyStore, config: NotifyConfig) -> Slack:
        return Slack(service, store, config)
