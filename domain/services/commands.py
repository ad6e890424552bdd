"""Commands of chats and turns: what a caller asks, as small typed values (the service
methods of `turns.py` take one each, instead of long parameter lists)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid5

from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.jsonsafe import check_json
from interlock.domain.chat.policies import Decider
from interlock.domain.chat.rules import RespondEntry, RestartEntry, VoteEntry, check_entries

ABANDONED_AFTER = timedelta(minutes=2)
_OPENED = UUID("5b0f8a52-3c1e-4e0b-9d36-2f6f1c9a7e41")  # the namespace of `opened_id`


@dataclass(frozen=True, kw_only=True)
class StartChat:
    """A new chat with `agent`; `chat_id` a server-made id (ConcurrencyError if taken)."""

    agent: str
    actor: str
    tenant: str = "default"
    metadata: dict[str, Any] | None = None
    chat_id: UUID | None = None


@dataclass(frozen=True, kw_only=True)
class OpenChat:
    """A new chat with `agent`, its first message `text`, and the turn that message starts
    (`max_turns` overrides the agent's budget). Under `idempotency_key` the chat's id is
    made of the key (`opened_id`), so a request sent again answers the chat it opened
    instead of opening another."""

    agent: str
    text: str
    actor: str
    tenant: str = "default"
    metadata: dict[str, Any] | None = None
    max_turns: int | None = None
    idempotency_key: str | None = None
    chat_id: UUID | None = None  # set from the key by `Turns.open`


@dataclass(frozen=True, kw_only=True)
class Send:
    """A user message, and the turn it starts; `max_turns` overrides the agent's budget."""

    chat_id: UUID
    text: str
    actor: str
    tenant: str | None = None
    max_turns: int | None = None


@dataclass(frozen=True, kw_only=True)
class Resume:
    """Decisions on pending interrupts (`respond`, `restart`) and votes on held calls.

    With `idempotency_key`, a repeat of the same body answers the first result.
    `metadata` is the resume's own (recorded on each decision, seen by restarted tools);
    `decider` says who votes (HTTP callers).
    """

    chat_id: UUID
    actor: str
    respond: Sequence[RespondEntry] = ()
    restart: Sequence[RestartEntry] = ()
    votes: Sequence[VoteEntry] = ()
    tenant: str | None = None
    idempotency_key: str | None = None
    metadata: dict[str, Any] | None = None
    max_turns: int | None = None
    decider: Decider | None = None

    def body_sha256(self) -> str:
        """The hash an idempotency key is bound to (checks the entries are encodable first)."""
        check_entries(self.respond, self.restart, self.metadata)
        body: dict[str, Any] = {
            "respond": [e.model_dump(mode="json") for e in self.respond],
            "restart": [e.model_dump(mode="json") for e in self.restart],
        }
        if self.metadata is not None or self.max_turns is not None:  # old keys keep old hashes
            body.update(metadata=self.metadata, max_turns=self.max_turns)
        if self.votes:  # so do keys of requests without votes
            body["votes"] = [[type(v).__name__, v.model_dump(mode="json")] for v in self.votes]
            check_json(body["votes"], "votes")
        return sha256_hex(body)


@dataclass(frozen=True, kw_only=True)
class Retry:
    """Continue from the last recorded step. A turn still `running` with no event for
    `stale_after` was left by a crashed process; `decider_only`: the actor may retry only
    a turn their decision started (an approver without the requester role)."""

    chat_id: UUID
    actor: str
    tenant: str | None = None
    stale_after: timedelta = ABANDONED_AFTER
    max_turns: int | None = None
    decider_only: bool = False


@dataclass(frozen=True, kw_only=True)
class Withdraw:
    """Take pending requests `refs` back, saying why; the model is told."""

    chat_id: UUID
    refs: Sequence[str]
    reason: str
    decider: Decider
    tenant: str | None = None


def opened_id(tenant: str, actor: str, key: str) -> UUID:
    """The id of the chat a principal opens with its first message under `key`: the same
    id for the same principal and key, another for anyone else's."""
    return uuid5(_OPENED, "\x00".join((tenant, actor, key)))
