"""A tenant's notification channels and Slack identity links (domain/channels.py,
domain/links.py), recorded in the tenant's channels stream."""

from __future__ import annotations

from interlock.domain.channels import (
    ChannelKind,
    Channels,
    EmailChannel,
    SlackChannel,
    channels_id,
    replay,
)
from interlock.domain.chat.events import now
from interlock.domain.chat.policies import Decider
from interlock.domain.links import Link, SlackLinkProposed, check_proposer, code_sha256, new_code
from interlock.domain.storage.mapper import Sealer
from interlock.domain.storage.repository import ChatRepository


class TenantChannels:
    """Set and remove a tenant's channels; propose, confirm and remove Slack links.
    A write that races another is a ConcurrencyError, and writes nothing."""

    def __init__(self, store: ChatRepository, sealer: Sealer) -> None:
        self._store, self._sealer = store, sealer

    def get(self, tenant: str) -> Channels:
        """The tenant's channels and links as recorded."""
        return replay(tenant, self._store.events.get(channels_id(tenant)))

    def set(self, tenant: str, kind: ChannelKind, config: EmailChannel | SlackChannel,
            *, actor: str) -> Channels:
        """Record the tenant's `kind` channel (replacing any)."""
        channels = self.get(tenant)
        channels.set(kind, config, actor)
        self.save(channels)
        return channels

    def remove(self, tenant: str, kind: ChannelKind, *, actor: str) -> bool:
        """Record the removal; False when the tenant had no such channel."""
        channels = self.get(tenant)
        if not channels.remove(kind, actor):
            return False
        self.save(channels)
        return True

    def propose_link(self, tenant: str, slack_user: str, *, principal: str | None,
                     proposer: Decider | str) -> tuple[str, SlackLinkProposed]:
        """Record that `slack_user` may become `principal` once it confirms; the one-time code
        (shown once, the log keeps its hash) and the proposal. A Slack user asking from Slack
        is the proposer `"slack:<user>"` and names no principal."""
        if isinstance(proposer, Decider):
            principal, proposed_by = check_proposer(proposer, principal), proposer.id
        else:
            principal, proposed_by = None, proposer
        code, channels = new_code(), self.get(tenant)
        proposal = channels.propose_link(slack_user, principal=principal, at=now(),
                                         proposed_by=proposed_by,
                                         code_sha256=code_sha256(tenant, code))
        self.save(channels)
        return code, proposal

    def confirm_link(self, tenant: str, code: str, *, confirmer: str) -> Link:
        """`confirmer`, signed in as itself, confirms a proposal with its code: the link.
        A wrong, expired or used code is refused and writes nothing; of two racing
        confirmations one wins."""
        channels = self.get(tenant)
        link = channels.confirm_link(code_sha256(tenant, code), confirmer=confirmer, at=now())
        self.save(channels)
        return link

    def unlink(self, tenant: str, slack_user: str, *, who: Decider) -> bool:
        """Remove a link (an admin, or its principal); False when there was none."""
        channels = self.get(tenant)
        if not channels.unlink(slack_user, who=who):
            return False
        self.save(channels)
        return True

    def save(self, channels: Channels) -> int | None:
        """Append what was recorded on `channels` since it was read; the position."""
        return self._store.append(channels.id, channels.seal(self._sealer.sign))
