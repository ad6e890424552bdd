"""The read models every store keeps: a new read model is one module and one line here."""

from __future__ import annotations

from interlock.projections.engine.sql import ReadModel
from interlock.projections.views import chats, decisions, inbox, reviews, webhooks

READ_MODELS: tuple[ReadModel, ...] = (
    inbox.READ_MODEL,
    decisions.READ_MODEL,
    chats.READ_MODEL,
    webhooks.READ_MODEL,
    reviews.READ_MODEL,
)
