"""Delegation: an approver away from one date to another names a colleague who decides for
them, with the same or a narrower scope (a subset of their roles and groups).

A tenant's delegations are one stream (like its channels, domain/channels.py): each grant and
revocation is an event, chained like a chat's. A delegate votes "for X, by delegation D"
(`Decider.acting_for`, recorded on the vote); the rules of domain/chat/rules.py then count
the vote as X's and bar it as if both X and the delegate cast it: neither may be a
requester of the call, neither may vote twice nor in two stages, and a conflict of roles
counts the delegate's own roles with the delegated ones.

A delegated vote is fenced against a revocation racing it: the vote's commit carries a
`DelegationUsed` event of the delegations stream, written in the same transaction at the
next version of that stream, after the same rule (`in_force`) is checked again at the
vote's time. A revocation that committed first makes the vote's write a conflict (it is
then refused as the delegation is no longer in force); one that comes after finds the
stream moved and is written after the vote (DelegationDesk retries it). Either the vote
lands before the revocation, or it is refused: never counted under a revoked delegation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from uuid import NAMESPACE_URL, UUID, uuid4, uuid5

from pydantic import BaseModel, ConfigDict, Field

from interlock.domain.chat.events import ChatEvent, now
from interlock.domain.chat.policies import Decider, normalise_id
from interlock.domain.errors import (
    ConcurrencyError,
    DelegationNotFoundError,
    ForbiddenError,
    InvalidRequestError,
)
from interlock.domain.streams import Stream, StreamEvent, StreamStore

_ATTEMPTS = 5  # a change of the stream losing to others' writes, at most this often
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,199}$"


def delegations_id(tenant: str) -> UUID:
    """The stream of a tenant's delegations."""
    return uuid5(NAMESPACE_URL, f"interlock:delegations:{tenant}")


class DelegationGranted(StreamEvent):
    """`delegator` let `delegate` decide for them with `roles`/`groups` from `starts_at`
    until `ends_at`."""

    tenant: str
    delegation_id: UUID
    delegator: str
    delegate: str
    roles: list[str]
    groups: list[str] = Field(default_factory=list)
    starts_at: datetime
    ends_at: datetime
    reason: str | None = None


class DelegationRevoked(StreamEvent):
    """The delegation ends now (by its delegator or an admin)."""

    tenant: str
    delegation_id: UUID
    actor: str


class DelegationUsed(StreamEvent):
    """`actor` voted on calls `refs` of chat `chat_id` for the delegator, by this
    delegation, while it was in force (the fence of the vote: it commits with the vote)."""

    tenant: str
    delegation_id: UUID
    actor: str
    chat_id: UUID
    refs: list[str]


class Delegation(BaseModel):
    """A delegation as the API shows it."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    delegator: str
    delegate: str
    roles: list[str]
    groups: list[str] = []
    starts_at: datetime
    ends_at: datetime
    reason: str | None = None
    granted_at: datetime
    revoked_at: datetime | None = None
    revoked_by: str | None = None

    def active(self, at: datetime) -> bool:
        return self.revoked_at is None and self.starts_at <= at < self.ends_at


class DelegationRequest(BaseModel):
    """Let `delegate` decide for you from `starts_at` until `ends_at`, with `roles`/`groups`
    (a subset of yours; omitted: all of yours but admin)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    delegate: str = Field(pattern=NAME)
    starts_at: datetime
    ends_at: datetime
    roles: list[str] | None = Field(None, max_length=100)
    groups: list[str] | None = Field(None, max_length=100)
    reason: str | None = Field(None, max_length=2000)


def _scope(asked: Iterable[str] | None, held: frozenset[str], kind: str, who: Decider
           ) -> list[str]:
    """The delegated names: those asked (all held when None), never wider than held."""
    given = set(held) if asked is None else {n.strip() for n in asked if n.strip()}
    wider = sorted(given - held)
    if wider:
        raise ForbiddenError(
            f"{who.id} may delegate only {kind} they hold; not {', '.join(wider)}",
            reason="wider_than_own", actor=who.id, **{kind: wider})
    return sorted(given - {"admin"})  # an admin's power is not lent: it decides anything


class Delegations(Stream):
    """A tenant's delegations, replayed from their events."""

    def __init__(self, tenant: str) -> None:
        super().__init__()
        self.tenant, self.id = tenant, delegations_id(tenant)
        self.granted: dict[UUID, Delegation] = {}

    def grant(self, who: Decider, request: DelegationRequest, at: datetime) -> Delegation:
        """Record that `who` delegates as `request` asks; refused when it lends more than
        `who` holds, names `who` itself, or its window is empty or over."""
        if normalise_id(request.delegate) == normalise_id(who.id):
            raise InvalidRequestError("a delegation names someone else", reason="self")
        if request.ends_at <= request.starts_at or request.ends_at <= at:
            raise InvalidRequestError("a delegation ends after it starts, and after now",
                                      reason="window", starts_at=request.starts_at.isoformat(),
                                      ends_at=request.ends_at.isoformat())
        roles = _scope(request.roles, who.roles, "roles", who)
        groups = _scope(request.groups, who.groups, "groups", who)
        if not roles and not groups:
            raise InvalidRequestError("a delegation lends at least one role or group",
                                      reason="empty_scope")
        delegation_id = uuid4()
        self._record(DelegationGranted(
            originator_id=self.id, originator_version=self.version + 1, timestamp=now(),
            tenant=self.tenant, delegation_id=delegation_id, delegator=who.id,
            delegate=request.delegate, roles=roles, groups=groups,
            starts_at=request.starts_at, ends_at=request.ends_at, reason=request.reason))
        return self.granted[delegation_id]

    def revoke(self, delegation_id: UUID, who: Decider) -> Delegation:
        """End a delegation now (its delegator or an admin); a revoked one stays revoked."""
        delegation = self.get(delegation_id)
        if not who.admin and normalise_id(who.id) != normalise_id(delegation.delegator):
            raise ForbiddenError(f"{who.id} did not grant delegation {delegation_id}",
                                 reason="not_the_delegator", actor=who.id)
        if delegation.revoked_at is None:
            self._record(DelegationRevoked(
                originator_id=self.id, originator_version=self.version + 1, timestamp=now(),
                tenant=self.tenant, delegation_id=delegation_id, actor=who.id))
        return self.granted[delegation_id]

    def get(self, delegation_id: UUID) -> Delegation:
        delegation = self.granted.get(delegation_id)
        if delegation is None:
            raise DelegationNotFoundError(delegation_id)
        return delegation

    def acting(self, delegation_id: UUID, who: Decider, at: datetime) -> Decider:
        """`who` deciding for the delegation's delegator at `at`: with the delegated scope,
        its own roles kept for conflicts. Refused unless `who` is its delegate and it is
        in force."""
        d = self.in_force(delegation_id, who.id, at)
        return Decider(who.id, frozenset(d.roles), frozenset(d.groups),
                       acting_for=d.delegator, delegation=str(d.id), holds=who.roles)

    def in_force(self, delegation_id: UUID, delegate: str, at: datetime) -> Delegation:
        """The delegation, when `delegate` is its delegate and it is in force at `at`."""
        d = self.get(delegation_id)
        if normalise_id(delegate) != normalise_id(d.delegate):
            raise ForbiddenError(f"delegation {delegation_id} is not {delegate}'s",
                                 reason="not_the_delegate", actor=delegate)
        if not d.active(at):
            raise ForbiddenError(
                f"delegation {delegation_id} is not in force now (from {d.starts_at.isoformat()}"
                f" until {d.ends_at.isoformat()}{', revoked' if d.revoked_at else ''})",
                reason="delegation_inactive", actor=delegate, delegation=str(delegation_id))
        return d

    def use(self, who: Decider, at: datetime, chat_id: UUID, refs: list[str]) -> None:
        """Record that `who` (deciding by a delegation: `acting` made it) votes on `refs`
        of `chat_id` at `at`; refused as `acting` refuses, if it is no longer in force."""
        if who.delegation is None:
            return
        delegation_id = UUID(who.delegation)
        self.in_force(delegation_id, who.id, at)
        self._record(DelegationUsed(
            originator_id=self.id, originator_version=self.version + 1, timestamp=now(),
            tenant=self.tenant, delegation_id=delegation_id, actor=who.id, chat_id=chat_id,
            refs=refs))

    def letting(self, who: Decider, roles: set[str], groups: set[str], at: datetime
                ) -> list[Delegation]:
        """The delegations in force at `at` whose delegate is `who` and whose scope may
        decide what `roles`/`groups` may (a held call's current stage)."""
        me = normalise_id(who.id)
        return [d for d in self.granted.values()
                if normalise_id(d.delegate) == me and d.active(at)
                and (set(d.roles) & roles or set(d.groups) & groups)]

    def visible_to(self, who: Decider, auditor: bool) -> list[Delegation]:
        """What `who` may list: all (an admin, an auditor) or those naming them."""
        me = normalise_id(who.id)
        return [d for d in self.granted.values()
                if who.admin or auditor or me in (normalise_id(d.delegator),
                                                  normalise_id(d.delegate))]

    def _record(self, event: ChatEvent) -> None:
        self.apply(event)
        self.pending_events.append(event)

    def apply(self, event: ChatEvent) -> None:
        if isinstance(event, DelegationGranted):
            self.granted[event.delegation_id] = Delegation(
                id=event.delegation_id, delegator=event.delegator, delegate=event.delegate,
                roles=event.roles, groups=event.groups, starts_at=event.starts_at,
                ends_at=event.ends_at, reason=event.reason, granted_at=event.timestamp)
        elif isinstance(event, DelegationRevoked):
            self.granted[event.delegation_id] = self.granted[event.delegation_id].model_copy(
                update={"revoked_at": event.timestamp, "revoked_by": event.actor})
        # a DelegationUsed changes no delegation: it only moves the stream (a fence)
        self._followed(event)


def replay(tenant: str, events: Iterable[object]) -> Delegations:
    """The tenant's delegations as recorded."""
    delegations = Delegations(tenant)
    for event in events:
        if isinstance(event, DelegationGranted | DelegationRevoked | DelegationUsed) \
                and event.tenant == tenant:
            delegations.apply(event)
    return delegations


class DelegationDesk:
    """The use cases of delegation: grant, revoke, list, and act under one."""

    def __init__(self, service: StreamStore) -> None:
        self.service = service

    def load(self, tenant: str) -> Delegations:
        return replay(tenant, self.service.events.get(delegations_id(tenant)))

    def grant(self, tenant: str, who: Decider, request: DelegationRequest) -> Delegation:
        return self._saved(tenant, lambda d: d.grant(who, request, now()))

    def revoke(self, tenant: str, delegation_id: UUID, who: Decider) -> Delegation:
        return self._saved(tenant, lambda d: d.revoke(delegation_id, who))

    def _saved(self, tenant: str, change: Callable[[Delegations], Delegation]) -> Delegation:
        """`change` applied to the stream as it is now, and saved; a delegated vote's fence
        (or another change) taking the stream's next version first: read again, retried."""
        for attempt in range(_ATTEMPTS):
            delegations = self.load(tenant)
            delegation = change(delegations)
            if not delegations.pending_events:
                return delegation
            try:
                self.service.save_stream(delegations.id,
                                         delegations.seal(self.service.sealer.sign))
            except ConcurrencyError:
                if attempt == _ATTEMPTS - 1:
                    raise
                continue
            return delegation
        raise AssertionError("unreachable")  # the loop returns or raises

    def acting(self, tenant: str, delegation_id: UUID, who: Decider) -> Decider:
        return self.load(tenant).acting(delegation_id, who, now())

    def deciding(self, tenant: str, who: Decider, roles: set[str], groups: set[str]
                 ) -> Decider:
        """Who `who` decides as where only one choice is possible (a Slack button names no
        delegation): themselves when their own roles may decide; else by the one delegation
        in force that lets them; two or more are refused (the vote names one elsewhere);
        none: themselves, and the rules refuse them as ever."""
        if who.may_decide(roles, groups):
            return who
        delegations = self.load(tenant)
        at = now()
        found = delegations.letting(who, roles, groups, at)
        if len(found) > 1:
            raise InvalidRequestError(
                f"{who.id} decides this by {len(found)} delegations (for "
                f"{', '.join(sorted(d.delegator for d in found))}): vote in the console or by"
                " the API naming one", reason="ambiguous_delegation",
                delegations=sorted(str(d.id) for d in found))
        return delegations.acting(found[0].id, who, at) if found else who
