"""Webhook delivery: Standard Webhooks signatures and the deliverer that drains the outbox."""

from interlock.webhooks.deliverer import Deliverer, DeliveryPolicy
from interlock.webhooks.signing import sign

__all__ = ["Deliverer", "DeliveryPolicy", "sign"]
