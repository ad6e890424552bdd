"""The channel port: what the notifier, the wiring and the channels API ask of a channel.
A channel queues the rows of a held call for its routed principals, sends them, updates
what it sent once the call is decided, and may take signed callbacks. Generic code never
asks which channel it holds: a new one is a module beside email.py and slack.py, listed in
registry.py, with its settings (interlock/settings.py, NotifyConfig, docs/configuration.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import BaseModel

from interlock.domain import Interlock
from interlock.domain.channels import Channels, QuietHours
from interlock.domain.principals import Directory, Principal
from interlock.notify.config import NotifyConfig
from interlock.notify.store import NotifyStore, Row


class UndeliverableError(Exception):
    """A row that can never be sent as it is (a malformed address, its call not found):
    given up at once, counted, and the rows after it go on."""


@dataclass(frozen=True)
class Asked:
    """A held call to tell of: the event's position, where it is, whom it is routed to."""

    position: int
    version: int  # the chat's, as it was asked: what is said is read at it when sent
    tenant: str
    chat_id: str
    ref: str
    told: list[Principal]
    channels: Channels  # the tenant's channels as recorded


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


class Callbacks(Protocol):
    """A channel's signed inbound callbacks (a button pressed in a message)."""

    def verify(self, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        """The callback's payload, once its signature says the channel sent it, just now,
        once; else UnauthenticatedError."""
        ...

    async def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Act on a verified callback (a vote, as the linked principal); the answer."""
        ...


class Channel(Protocol):
    """One channel of this process, built by its `ChannelType` from the settings."""

    kind: str
    # What a failed send raises when trying again later may succeed (a server, the network).
    delivery_errors: tuple[type[BaseException], ...]

    def rows(self, asked: Asked) -> list[Row]:
        """The rows that tell the call's routed principals, when the tenant set this channel."""
        ...

    def decided(self, position: int, chat_id: str, ref: str, outcome: str) -> list[Row]:
        """The rows that update what this channel told of a call, now decided."""
        ...

    def check(self, row: Row) -> None:
        """Refuse (UndeliverableError) a row that can never be sent as it is."""
        ...

    def needs_chat(self, row: Row) -> bool:
        """Whether the row tells the call's facts (read from the chat when sent; none once
        it is erased), rather than an outcome that holds no personal data."""
        ...

    def send(self, rows: list[Row]) -> dict[str, Any]:
        """Send the rows (one, or a digest's rows to one recipient); the receipt kept."""
        ...

    def batch(self, row: Row) -> str | None:
        """The key of the digest the row waits for (rows with one key go as one); None:
        the row goes alone."""
        ...

    def callbacks(self, auth: Directory) -> Callbacks | None:
        """The handler of this channel's signed callbacks; None when it takes none."""
        ...


class ChannelType(Protocol):
    """A channel as the registry lists it: its kind, the body an admin sets it with, and
    how it is opened from the settings."""

    kind: str
    config: type[BaseModel]  # the body of PUT /v1/channels/{kind}
    summary: str  # that route's description
    row_kinds: tuple[str, ...]  # the outbox rows it sends (Row.kind)

    def enabled(self, config: NotifyConfig) -> bool:
        """Whether the settings configure a way to send on this channel."""
        ...

    def open(self, service: Interlock, store: NotifyStore, config: NotifyConfig) -> Channel:
        ...
