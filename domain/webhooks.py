"""Webhook subscriptions as events: who subscribed which URL to what and when, who removed it.

A subscription is a small aggregate in the same log as the chats, sealed into its own
chain like them (so `verify` covers it and the webhooks view rebuilds it). The log never
holds the signing secret: only its SHA-256, which names the secret an auditor is shown
without letting anyone sign with it. The secret itself is kept beside the outbox
(docs/webhooks.md, "Secrets").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from uuid import UUID

from interlock.domain.chat.events import ChatEvent, now
from interlock.domain.streams import Stream, StreamEvent

PREFIX = "sub_"


class WebhookEvent(StreamEvent):
    """Sealed and stored like a chat's events, but no chat is made of them."""


class WebhookSubscribed(WebhookEvent):
    """An admin of `tenant` asked for `events` to be POSTed to `url`."""

    tenant: str
    url: str
    events: list[str]
    actor: str
    secret_sha256: str


class WebhookUnsubscribed(WebhookEvent):
    """An admin removed the subscription; its undelivered notifications go with it."""

    tenant: str
    actor: str


class Webhook(Stream):
    """One subscription, replayed from its events."""

    def __init__(self, subscribed: WebhookSubscribed) -> None:
        super().__init__(subscribed.originator_version, subscribed.chain)
        self.id = subscribed.originator_id
        self.subscribed = subscribed
        self.removed: WebhookUnsubscribed | None = None
        self.position: int | None = None  # of its last event, once saved by this process

    @property
    def tenant(self) -> str:
        return self.subscribed.tenant

    @property
    def public_id(self) -> str:
        """The id the API shows: `sub_<hex>`."""
        return public_id(self.id)

    @classmethod
    def subscribe(cls, webhook_id: UUID, *, tenant: str, url: str, events: Sequence[str],
                  actor: str, secret_sha256: str) -> Webhook:
        """A new subscription (its event pending until saved)."""
        first = WebhookSubscribed(originator_id=webhook_id, originator_version=1,
                                  timestamp=now(), tenant=tenant, url=url,
                                  events=sorted(set(events)), actor=actor,
                                  secret_sha256=secret_sha256)
        hook = cls(first)
        hook.pending_events.append(first)
        return hook

    def unsubscribe(self, *, actor: str) -> None:
        """Record the removal; a removed subscription is not removed twice."""
        if self.removed is not None:
            return
        event = WebhookUnsubscribed(originator_id=self.id, originator_version=self.version + 1,
                                    timestamp=now(), tenant=self.tenant, actor=actor)
        self._apply(event)
        self.pending_events.append(event)

    def _apply(self, event: ChatEvent) -> None:
        if isinstance(event, WebhookUnsubscribed):
            self.removed = event
        self._followed(event)


def replay(events: Iterable[object]) -> Webhook | None:
    """The subscription these events describe; None when they are not one's."""
    hook: Webhook | None = None
    for event in events:
        if isinstance(event, WebhookSubscribed) and hook is None:
            hook = Webhook(event)
        elif isinstance(event, ChatEvent) and hook is not None:
            hook._apply(event)
        else:
            return None  # another kind of stream (a chat) under this id
    return hook


def public_id(webhook_id: UUID) -> str:
    return PREFIX + webhook_id.hex


def parse_id(text: str) -> UUID | None:
    """The aggregate id of `sub_<hex>`; None for anything else."""
    if not text.startswith(PREFIX):
        return None
    try:
        return UUID(hex=text.removeprefix(PREFIX))
    except ValueError:
        return None
