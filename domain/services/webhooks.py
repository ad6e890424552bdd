"""Webhook subscriptions: recorded as events of their own stream, read back by replay."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from interlock.domain.storage.mapper import Sealer
from interlock.domain.storage.repository import ChatRepository
from interlock.domain.webhooks import Webhook, replay


class Webhooks:
    """Subscribe, unsubscribe, and read a subscription as recorded."""

    def __init__(self, store: ChatRepository, sealer: Sealer) -> None:
        self._store, self._sealer = store, sealer

    def subscribe(self, webhook_id: UUID, *, tenant: str, url: str, events: Sequence[str],
                  actor: str, secret_sha256: str) -> Webhook:
        """Record a subscription (`position` says where). ConcurrencyError if the id is taken."""
        hook = Webhook.subscribe(webhook_id, tenant=tenant, url=url, events=events,
                                 actor=actor, secret_sha256=secret_sha256)
        hook.position = self._save(hook)
        return hook

    def unsubscribe(self, webhook_id: UUID, *, tenant: str, actor: str) -> int | None:
        """Record the removal; its position, None if the tenant has no such subscription."""
        hook = self.get(webhook_id, tenant=tenant)
        if hook is None or hook.removed is not None:
            return None
        hook.unsubscribe(actor=actor)
        return self._save(hook)

    def get(self, webhook_id: UUID, *, tenant: str | None = None) -> Webhook | None:
        """The subscription as recorded; None if there is none (or another tenant's)."""
        hook = replay(self._store.events.get(webhook_id))
        return hook if hook is not None and tenant in (None, hook.tenant) else None

    def _save(self, hook: Webhook) -> int | None:
        return self._store.append(hook.id, hook.seal(self._sealer.sign))
