"""Notification channels as events: which tenant tells its approvers by email or Slack, to
which addresses, who set it and when; and which Slack user is which principal, as each
principal confirmed it (domain/links.py). One stream per tenant, chained like a chat's."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, time, timedelta
from typing import Annotated, Any
from uuid import NAMESPACE_URL, UUID, uuid5
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from interlock.domain.chat.events import ChatEvent, now
from interlock.domain.chat.policies import Decider
from interlock.domain.email_address import addr_spec
from interlock.domain.links import (
    CODE_TTL,
    Link,
    LinkEvent,
    Links,
    SlackLinked,
    SlackLinkProposed,
    SlackUnlinked,
    check_remover,
)
from interlock.domain.streams import Stream, StreamEvent

# A channel's kind, as the registry of the notifier names it (interlock/notify/channels):
# the domain records any, so a new channel needs nothing here.
ChannelKind = str
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
    """Held calls are sent as direct messages to the routed principals' linked Slack users; a
    vote from a message counts as the principal that confirmed the link (never an admin's
    mapping: docs/notifications.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    users: dict[str, str] | None = Field(
        None, deprecated=True, description="refused when not empty: each principal confirms "
        "its own Slack user (POST /v1/channels/slack/links)")
    quiet_hours: QuietHours | None = None

    @field_validator("users")
    @classmethod
    def _no_mapping(cls, users: dict[str, str] | None) -> dict[str, str] | None:
        if users:
            raise ValueError(
                "an admin no longer maps Slack users to principals: each principal confirms "
                "its own link (POST /v1/channels/slack/links, docs/notifications.md)")
        return None


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
        self.links = Links()
        self.unconfirmed: dict[str, str] = {}  # an admin's mapping of old: counts for nobody

    def email(self) -> EmailChannel | None:
        found = self.configured.get("email")
        return EmailChannel.model_validate(found, context=RECORDED) if found is not None else None

    def slack(self) -> SlackChannel | None:
        found = self.configured.get("slack")
        if found is None:
            return None
        return SlackChannel.model_validate({k: v for k, v in found.items() if k != "users"})

    def principal_of(self, slack_user: str) -> str | None:
        """Whom a Slack user counts as: the principal that confirmed its link, if any."""
        link = self.links.linked.get(slack_user)
        return link.principal if link is not None else None

    def linked(self) -> dict[str, str]:
        """Slack user -> principal, for the confirmed links only."""
        return {user: link.principal for user, link in self.links.linked.items()}

    def propose_link(self, slack_user: str, *, principal: str | None, proposed_by: str,
                     code_sha256: str, at: datetime) -> SlackLinkProposed:
        """Record a proposal its principal confirms with the code before `at` + CODE_TTL."""
        event = SlackLinkProposed(
            originator_id=self.id, originator_version=self.version + 1, timestamp=at,
            tenant=self.tenant, slack_user=slack_user, principal=principal,
            proposed_by=proposed_by, code_sha256=code_sha256, expires_at=at + CODE_TTL)
        self._record(event)
        return event

    def confirm_link(self, code_sha256: str, *, confirmer: str, at: datetime) -> Link:
        """`confirmer` (signed in as itself) confirms the proposal of this code: the link."""
        proposal = self.links.check_confirmable(code_sha256, confirmer, at)
        self._record(SlackLinked(
            originator_id=self.id, originator_version=self.version + 1, timestamp=at,
            tenant=self.tenant, slack_user=proposal.slack_user, principal=confirmer,
            proposed_by=proposal.proposed_by, confirmed_by=confirmer, code_sha256=code_sha256,
            replaced=self.principal_of(proposal.slack_user)))
        return self.links.linked[proposal.slack_user]

    def unlink(self, slack_user: str, *, who: Decider) -> bool:
        """Record the link's removal (by an admin or its principal); False when the Slack
        user was linked to nobody."""
        link = self.links.linked.get(slack_user)
        if link is None:
            return False
        check_remover(who, link)
        self._record(SlackUnlinked(
            originator_id=self.id, originator_version=self.version + 1, timestamp=now(),
            tenant=self.tenant, slack_user=slack_user, principal=link.principal, actor=who.id))
        return True

    def set(self, kind: ChannelKind, config: BaseModel, actor: str) -> None:
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
            if event.kind == "slack":
                self.unconfirmed = dict(event.config.get("users") or {})
        elif isinstance(event, ChannelRemoved):
            self.configured.pop(event.kind, None)
        elif isinstance(event, LinkEvent):
            self.links.apply(event)
        self._followed(event)


def replay(tenant: str, events: Iterable[object]) -> Channels:
    """The tenant's channels as recorded (none configured when the stream is empty)."""
    channels = Channels(tenant)
    for event in events:
        if isinstance(event, ChannelSet | ChannelRemoved | LinkEvent) and (
                event.tenant == tenant):
            channels.apply(event)
    return channels
