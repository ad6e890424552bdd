"""Notification channels as events: which tenant tells its approvers by email or Slack, to
which addresses, who set it and when. One stream per tenant, chained like a chat's."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, time, timedelta
from typing import Annotated, Any, Literal
from uuid import NAMESPACE_URL, UUID, uuid5
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from interlock.domain.chat.events import ChatEvent, now
from interlock.domain.email_address import addr_spec
from interlock.domain.streams import Stream, StreamEvent

ChannelKind = Literal["email", "slack"]
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,199}$"


class QuietHours(BaseModel):
    """Nothing is sent from `start` to `end` (local times of `zone`); it waits until `end`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: time
    end: time
    zone: str = Field("UTC", max_length=64, description="an IANA zone, e.g. Europe/Paris")

    @field_validator("zone")
    @classmethod
    def _known(cls, zone: str) -> str:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {zone!r}") from None
        return zone

    def until(self, at: datetime) -> datetime | None:
        """When the quiet period holding `at` ends; None when `at` is not in one."""
        local = at.astimezone(ZoneInfo(self.zone))
        now, start, end = local.time(), self.start, self.end
        inside = start <= now < end if start <= end else (now >= start or now < end)
        if not inside or start == end:
            return None
        ends = datetime.combine(local.date(), end, local.tzinfo)
        return ends if ends > local else ends + timedelta(days=1)


RECORDED = {"recorded": True}  # validation context: a config read back from its stream


def _address(value: str, info: ValidationInfo) -> str:
    """One RFC 5322 address when set; a recorded one is read back as it was (the notifier
    gives up a row to an address older versions took unchecked, and tells)."""
    return value if info.context == RECORDED else addr_spec(value)


class EmailChannel(BaseModel):
    """Held calls are mailed to the routed principals that have an address here; with
    `digest_minutes`, one mail a period lists what was asked in it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    addresses: dict[str, Annotated[str, AfterValidator(_address)]] = Field(
        description="principal id -> email address", max_length=10_000)
    digest_minutes: int | None = Field(None, ge=1, le=1440)
    quiet_hours: QuietHours | None = None


class SlackChannel(BaseModel):
    """Held calls are sent as direct messages to the routed principals' Slack users; a vote
    from a message counts as the principal its Slack user is mapped to here."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    users: dict[str, str] = Field(
        description="Slack user id -> principal id", max_length=10_000)
    quiet_hours: QuietHours | None = None


CONFIGS: dict[ChannelKind, type[EmailChannel] | type[SlackChannel]] = {
    "email": EmailChannel, "slack": SlackChannel}


class ChannelSet(StreamEvent):
    """An admin of `tenant` set (or replaced) the `kind` channel."""

    tenant: str
    kind: ChannelKind
    config: dict[str, Any]
    actor: str


class ChannelRemoved(StreamEvent):
    tenant: str
    kind: ChannelKind
    actor: str


def channels_id(tenant: str) -> UUID:
    """The tenant's channel stream: one per tenant, found without an index."""
    return uuid5(NAMESPACE_URL, f"interlock:channels:{tenant}")


class Channels(Stream):
    """A tenant's channels, replayed from their events."""

    def __init__(self, tenant: str) -> None:
        super().__init__()
        self.tenant, self.id = tenant, channels_id(tenant)
        self.configured: dict[ChannelKind, dict[str, Any]] = {}
        self.set_by: dict[ChannelKind, str] = {}

    def email(self) -> EmailChannel | None:
        found = self.configured.get("email")
        return EmailChannel.model_validate(found, context=RECORDED) if found is not None else None

    def slack(self) -> SlackChannel | None:
        found = self.configured.get("slack")
        return SlackChannel.model_validate(found) if found is not None else None

    def set(self, kind: ChannelKind, config: EmailChannel | SlackChannel, actor: str) -> None:
        self._record(ChannelSet(originator_id=self.id, originator_version=self.version + 1,
                                timestamp=now(), tenant=self.tenant, kind=kind,
                                config=config.model_dump(mode="json"), actor=actor))

    def remove(self, kind: ChannelKind, actor: str) -> bool:
        """Record the removal; False when there was no such channel."""
        if kind not in self.configured:
            return False
        self._record(ChannelRemoved(originator_id=self.id, originator_version=self.version + 1,
                                    timestamp=now(), tenant=self.tenant, kind=kind, actor=actor))
        return True

    def _record(self, event: ChatEvent) -> None:
        self.apply(event)
        self.pending_events.append(event)

    def apply(self, event: ChatEvent) -> None:
        if isinstance(event, ChannelSet):
            self.configured[event.kind] = event.config
            self.set_by[event.kind] = event.actor
        elif isinstance(event, ChannelRemoved):
            self.configured.pop(event.kind, None)
        self._followed(event)


def replay(tenant: str, events: Iterable[object]) -> Channels:
    """The tenant's channels as recorded (none configured when the stream is empty)."""
    channels = Channels(tenant)
    for event in events:
        if isinstance(event, ChannelSet | ChannelRemoved) and event.tenant == tenant:
            channels.apply(event)
    return channels
