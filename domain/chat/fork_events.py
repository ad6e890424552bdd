"""Forks: a new chat holding another's history up to a version, linked both ways.

`ChatForked` follows the fork's `ChatStarted` and carries the source's state at that
version (messages, calls, the pending ones still pending); `ChatForkedTo` is the link
recorded in the source. Both are stored under `interlock:<ClassName>` like every chat
event; the copied history is personal data, encrypted under the fork's own key.
"""

from __future__ import annotations

from uuid import UUID

from interlock.domain.chat.events import ChatEvent
from interlock.domain.chat.state import ChatState
from interlock.domain.storage.erasure import PERSONAL

# What a fork copies of its source's state; the rest (agent, tenant, who started it, its
# chain, its idempotency keys) is the fork's own.
COPIED = ("messages", "calls", "batch", "batch_closed", "turn", "turn_by", "status",
          "finish_reason", "error", "fingerprint")


class ChatForked(ChatEvent):
    """This chat began as `source_id`'s history up to `source_version` (None once erased)."""

    source_id: UUID
    source_version: int
    actor: str
    history: ChatState | None = None

    def apply(self, state: ChatState) -> None:
        if self.history is None:  # erased: the fork keeps nothing of it
            return
        copied = self.history.model_copy(deep=True)  # the event stays as it was recorded
        for name in COPIED:
            setattr(state, name, getattr(copied, name))


class ChatForkedTo(ChatEvent):
    """A fork `fork_id` was made of this chat's history up to `version`."""

    fork_id: UUID
    version: int
    actor: str


PERSONAL[ChatForked.TOPIC] = {"history": None}
