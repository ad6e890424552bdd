"""Identity links: a Slack user counts as a principal only once that principal confirmed it.

A link is proposed (from Slack, by an admin, or by the principal itself) with a one-time code;
the principal confirms it with the code under its own credentials. Proposal, link and removal
are events of the tenant's channel stream (domain/channels.py), naming who proposed and who
confirmed. The log keeps the code's SHA-256 only (bound to the tenant), never the code.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from interlock.domain.chat.policies import Decider, normalise_id
from interlock.domain.errors import ForbiddenError, InvalidRequestError
from interlock.domain.streams import StreamEvent

CODE_TTL = timedelta(minutes=10)
SLACK_USER = r"^[A-Z0-9]{2,64}$"  # Slack's user ids: U0123ABCD, W0123ABCD
_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud, typed by hand
_LENGTH = 10  # 50 bits: not guessed within its ten minutes


class SlackLinkProposed(StreamEvent):
    """Someone asked that `slack_user` count as `principal` (None: whoever holds the code)."""

    tenant: str
    slack_user: str
    principal: str | None = None
    proposed_by: str  # a principal, or "slack:<user>" when the Slack user asked in Slack
    code_sha256: str
    expires_at: datetime


class SlackLinked(StreamEvent):
    """`principal` confirmed, with its own credentials and the code, that `slack_user` is it."""

    tenant: str
    slack_user: str
    principal: str
    proposed_by: str
    confirmed_by: str
    code_sha256: str
    replaced: str | None = None  # the principal the Slack user counted as until now


class SlackUnlinked(StreamEvent):
    """The link was removed (by an admin or by its principal): the Slack user counts as nobody."""

    tenant: str
    slack_user: str
    principal: str
    actor: str


LinkEvent = SlackLinkProposed | SlackLinked | SlackUnlinked


class Link(BaseModel):
    """A confirmed link, as the API shows it."""

    model_config = ConfigDict(frozen=True)

    slack_user: str
    principal: str
    proposed_by: str
    confirmed_by: str
    at: datetime


class LinkRequest(BaseModel):
    """Ask that a Slack user count as `principal` (yourself when omitted), once it confirms."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    slack_user: str = Field(pattern=SLACK_USER, description="a Slack user id, e.g. U0123ABCD")
    principal: str | None = Field(None, min_length=1, max_length=200)


def check_proposer(who: Decider, principal: str | None) -> str:
    """The principal a proposal by `who` names: itself, or (an admin only) someone who must
    then confirm it; a proposal never links anyone by itself."""
    if principal is None or normalise_id(principal) == normalise_id(who.id):
        return who.id
    if not who.admin:
        raise ForbiddenError(f"{who.id} may propose a Slack link for itself only",
                             reason="not_the_principal", actor=who.id)
    return principal


def check_remover(who: Decider, link: Link) -> None:
    """An admin or the linked principal removes a link; nobody else."""
    if not who.admin and normalise_id(who.id) != normalise_id(link.principal):
        raise ForbiddenError(f"{who.id} may not remove {link.principal}'s Slack link",
                             reason="not_the_principal", actor=who.id)


def new_code() -> str:
    """A one-time code, `XXXXX-XXXXX`, from a cryptographic source."""
    raw = "".join(secrets.choice(_ALPHABET) for _ in range(_LENGTH))
    return f"{raw[:5]}-{raw[5:]}"


def code_sha256(tenant: str, code: str) -> str:
    """What the log keeps of a code: its hash, bound to the tenant (another's cannot match)."""
    plain = "".join(code.split()).replace("-", "").upper()
    return hashlib.sha256(f"interlock:link:{tenant}:{plain}".encode()).hexdigest()


class Links:
    """A tenant's open proposals and confirmed links, replayed from their events."""

    def __init__(self) -> None:
        self.proposals: dict[str, SlackLinkProposed] = {}
        self.used: set[str] = set()
        self.linked: dict[str, Link] = {}

    def check_confirmable(self, sha: str, confirmer: str, at: datetime) -> SlackLinkProposed:
        """The proposal `confirmer` may confirm with this code now; refused otherwise."""
        if sha in self.used:
            raise InvalidRequestError("this link code was used already; ask for a new one",
                                      reason="code_used")
        proposal = self.proposals.get(sha)
        if proposal is None:
            raise InvalidRequestError("no such link code in this tenant", reason="code_unknown")
        if at >= proposal.expires_at:
            raise InvalidRequestError(
                f"this link code expired at {proposal.expires_at.isoformat()}; ask for a new "
                "one", reason="code_expired")
        if proposal.principal is not None and (
                normalise_id(proposal.principal) != normalise_id(confirmer)):
            raise ForbiddenError(
                f"this link code is for {proposal.principal}: only {proposal.principal} "
                "confirms it", reason="not_the_principal", actor=confirmer)
        return proposal

    def apply(self, event: LinkEvent) -> None:
        if isinstance(event, SlackLinkProposed):
            self.proposals[event.code_sha256] = event
        elif isinstance(event, SlackLinked):
            self.proposals.pop(event.code_sha256, None)
            self.used.add(event.code_sha256)
            self.linked[event.slack_user] = Link(
                slack_user=event.slack_user, principal=event.principal,
                proposed_by=event.proposed_by, confirmed_by=event.confirmed_by,
                at=event.timestamp)
        else:
            self.linked.pop(event.slack_user, None)
