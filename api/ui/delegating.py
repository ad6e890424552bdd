"""Delegation on the decide form: which delegations let the visitor vote on a held call.

The rules are the domain's: a choice is offered only when `Delegations.acting` and
`check_voter` (the checks the server runs on submit) let the vote through.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from interlock.api.auth import Principal
from interlock.api.ui.stages import short_id
from interlock.domain.chat.policies import normalise_id
from interlock.domain.chat.rules import check_voter
from interlock.domain.chat.state import ToolCall
from interlock.domain.delegations import Delegations
from interlock.domain.errors import (
    AlreadyVotedError,
    ForbiddenError,
    InvalidRequestError,
)


@dataclass(frozen=True)
class DelegationChoice:
    """A delegation the visitor may vote under on this call: for `delegator`."""

    id: str
    delegator: str

    @property
    def short(self) -> str:
        return short_id(self.id)

    @property
    def label(self) -> str:
        return f"vote for {self.delegator} by delegation {self.short}"


def choices(book: Delegations, who: Principal, call: ToolCall, at: datetime
            ) -> tuple[DelegationChoice, ...]:
    """The visitor's delegations in force that let them vote on `call` now (the call
    itself must be open to votes: the caller checks that first)."""
    me, found = normalise_id(who.id), []
    for d in book.granted.values():
        if normalise_id(d.delegate) != me or not d.active(at):
            continue
        try:
            check_voter(call, book.acting(d.id, who.decider(), at))
        except (ForbiddenError, AlreadyVotedError):
            continue
        found.append(DelegationChoice(id=str(d.id), delegator=d.delegator))
    return tuple(sorted(found, key=lambda c: (c.delegator, c.id)))


def chosen(raw: str) -> UUID | None:
    """The decide form's `delegation` (blank: the visitor's own vote)."""
    if not raw.strip():
        return None
    try:
        return UUID(raw.strip())
    except ValueError:
        raise InvalidRequestError(f"delegation is not a delegation id: {raw[:40]!r}",
                                  field="delegation") from None
