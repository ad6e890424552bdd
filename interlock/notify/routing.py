"""Who is told of a held call: the principals its policy routes it to, as the server knows
them (its API keys), never who asked for it nor who voted on it already."""

from __future__ import annotations

from interlock.domain.chat.policies import ApprovalState, normalise_id
from interlock.domain.chat.rules import barred_voters
from interlock.domain.principals import Directory, Principal, of_tenant


def routed(approval: ApprovalState, requester: str | None, auth: Directory,
           tenant: str) -> list[Principal]:
    """The principals who may decide the call now and have not, admins only when named."""
    roles, groups = approval.deciders()
    barred = barred_voters(approval, requester)
    return sorted((p for p in of_tenant(auth, tenant).values()
                   if (set(p.roles) & roles or set(p.groups) & groups)
                   and normalise_id(p.id) not in barred), key=lambda p: p.id)
