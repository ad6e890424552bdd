"""Subscribing and unsubscribing: the secret kept beside the outbox, the fact in the log."""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
from collections.abc import Sequence
from uuid import UUID, uuid4

from interlock.domain import Interlock
from interlock.domain.errors import ConcurrencyError
from interlock.domain.webhooks import parse_id, public_id
from interlock.projections.views.webhooks import Subscription, WebhooksView
from interlock.webhooks.addresses import AddressPolicy
from interlock.webhooks.signing import PREFIX

log = logging.getLogger("interlock.webhooks")
MIGRATED_BY = "interlock:migration"  # the actor of subscriptions recorded from the old table


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and 24 random bytes in base64."""
    return PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def secret_sha256(secret: str) -> str:
    """What the log records of a secret: enough to tell which one, not to sign with it."""
    return hashlib.sha256(secret.encode()).hexdigest()


class Subscriptions:
    """A tenant's webhook subscriptions: recorded as events, read from the webhooks view."""

    def __init__(self, service: Interlock, view: WebhooksView,
                 addresses: AddressPolicy | None = None) -> None:
        self.service, self.view = service, view
        self.addresses = addresses or AddressPolicy()

    def subscribe(self, tenant: str, url: str, host: str, events: Sequence[str],
                  actor: str) -> Subscription:
        """A new subscription (with its secret, shown this once); RefusedAddressError (422)
        for a host no delivery may go to."""
        self.addresses.check_host(host)
        secret, hook_id = new_secret(), uuid4()
        # The secret first: a subscription whose event is recorded always has one.
        self.view.keep_secret(public_id(hook_id), secret)
        hook = self.service.webhooks.subscribe(hook_id, tenant=tenant, url=url, events=events,
                                              actor=actor, secret_sha256=secret_sha256(secret))
        first = hook.subscribed
        return Subscription(id=hook.public_id, tenant=tenant, url=url, events=first.events,
                            created_at=first.timestamp, secret=secret)

    def unsubscribe(self, tenant: str, sub_id: str, actor: str) -> bool:
        """Record the removal; False when the tenant has no such subscription."""
        hook_id = parse_id(sub_id)
        if hook_id is None:
            return False
        return self.service.webhooks.unsubscribe(hook_id, tenant=tenant, actor=actor) is not None

    def migrate(self) -> int:
        """Record an event for each subscription of the old table, then drop it (idempotent:
        one recorded already is skipped); how many were recorded."""
        recorded = 0
        for row in self.view.legacy_subscriptions():
            hook_id = parse_id(row["id"])
            if hook_id is None or self.service.webhooks.get(hook_id) is not None:
                continue
            self.view.keep_secret(row["id"], row["secret"])
            if self._record(hook_id, row["tenant"], row["url"], row["events"]):
                recorded += 1
        self.view.drop_legacy()
        if recorded:
            log.warning("recorded %d webhook subscriptions of the old table as events",
                        recorded)
        return recorded

    def _record(self, hook_id: UUID, tenant: str, url: str, events: str) -> bool:
        secret = self.view.secret(public_id(hook_id)) or ""
        try:
            self.service.webhooks.subscribe(
                hook_id, tenant=tenant, url=url, events=[e for e in events.split("|") if e],
                actor=MIGRATED_BY, secret_sha256=secret_sha256(secret))
        except ConcurrencyError:
            return False  # another process recorded it meanwhile
        return True
