"""The review desk: runs review queries on the reviews view and opens reviews from their
answers. Shared by the HTTP API and the CLI, so both mean the same by a query."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from interlock.domain.errors import InvalidFilterError
from interlock.domain.policy_book import PolicyDesk
from interlock.domain.review.aggregate import Review, signers_for
from interlock.domain.review.events import QueryRecord
from interlock.domain.review.queries import SHIPPED, BoundQuery, resolve
from interlock.domain.review.sampling import (
    METHOD,
    check_seed,
    check_spec,
    new_seed,
    stratum_name,
)
from interlock.domain.review.service import Reviews
from interlock.projections.engine.pages import Page
from interlock.projections.views.reviews import ReviewFact, ReviewsView, revoked


class ReviewDesk:
    """Queries and reviews of one store; `principals`: the ids the keys file names now
    (None in dev mode, where no key was ever revoked and `revoked_actor` cannot answer)."""

    def __init__(self, reviews: Reviews, view: ReviewsView,
                 principals: Collection[str] | None,
                 second_signer: Collection[str] = frozenset()) -> None:
        self.reviews, self.view, self.principals = reviews, view, principals
        self.second_signer = second_signer  # tenants whose reviews two auditors sign off

    def bind(self, tenant: str, name: str, params: Mapping[str, Any] | None = None,
             custom: str | None = None) -> BoundQuery:
        """The query bound to the client's parameters and the server's own."""
        given = dict(params or {})
        query = SHIPPED.get(name)
        server = {p.name for p in query.params if p.server} if query else set()
        if server & set(given):
            raise InvalidFilterError(f"{name}: the server supplies {sorted(server)}")
        if name == "revoked_actor":
            if self.principals is None:
                raise InvalidFilterError("revoked_actor needs the server's keys file (dev mode "
                                         "has none)")
            given["revoked"] = revoked(self.view, tenant, set(self.principals))
        if name == "policy_withdrawn":
            given["withdrawn"] = [f"{v.id}@{v.version}" for v in
                                  PolicyDesk(self.reviews.app).load(tenant).all_versions()
                                  if v.withdrawn_at is not None]
        return resolve(name, given, custom)

    def run(self, tenant: str, name: str, params: Mapping[str, Any] | None = None,
            custom: str | None = None, limit: int = 50,
            cursor: str | None = None) -> tuple[BoundQuery, Page[ReviewFact]]:
        bound = self.bind(tenant, name, params, custom)
        return bound, self.view.facts(tenant, bound.node, limit, cursor)

    def open(self, tenant: str, actor: str, name: str, *, params: Mapping[str, Any] | None = None,
             custom: str | None = None, size: int, strata: Sequence[str] = (),
             seed: str | None = None) -> Review:
        """A review of a seeded sample of the query's answer."""
        check_spec(size, strata)
        seed = new_seed() if seed is None else seed
        check_seed(seed)
        bound = self.bind(tenant, name, params, custom)
        drawn, sizes = self.view.sample(tenant, bound.node, tuple(strata), size, seed, METHOD)
        record = QueryRecord(name=bound.name, version=bound.version, filter=bound.filter,
                             params=bound.params)
        return self.reviews.open(tenant=tenant, actor=actor, query=record, drawn=drawn,
                                 strata_sizes={stratum_name(k): n for k, n in sizes.items()},
                                 size=size, strata=strata, seed=seed, method=METHOD,
                                 signers=signers_for(tenant, self.second_signer))
