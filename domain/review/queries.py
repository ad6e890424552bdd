"""The review queries Interlock ships: named, versioned filters with typed parameters.

A query's text never changes under its version: a changed query is a new version, so a
review that names `fast_approval` v1 can be re-run and mean the same thing later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from interlock.domain.errors import InvalidFilterError, UnknownReviewQueryError
from interlock.domain.review.fields import bind
from interlock.domain.review.filters import Node, parse

CUSTOM = "custom"  # a client's own filter, in the language of filters.py (its version: 1)
LANGUAGE_VERSION = 1


class QueryParam(BaseModel):
    """One parameter of a shipped query."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: str
    default: Any = None
    description: str
    server: bool = False  # supplied by the server (from its keys file), never by the client


class ReviewQuery(BaseModel):
    """A named, versioned question reviewers ask of the decision log."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    title: str
    filter: str
    params: tuple[QueryParam, ...] = ()
    alarm: bool = False  # the answer must be empty: any row is a finding


def _p(name: str, type: str, default: Any, description: str, server: bool = False) -> QueryParam:
    return QueryParam(name=name, type=type, default=default, description=description,
                      server=server)


SHIPPED: Mapping[str, ReviewQuery] = {q.name: q for q in (
    ReviewQuery(name="requester_approved", version=1, alarm=True,
                title="An approval vote by the call's requester or its last editor",
                filter="requester_approved = true"),
    ReviewQuery(name="fast_approval", version=1,
                title="Approved within N seconds of being asked",
                filter='kind in ("approve", "respond") and wait_seconds < :seconds',
                params=(_p("seconds", "number", 10, "seconds from the ask to the approval"),)),
    ReviewQuery(name="edited_then_approved", version=1,
                title="Approved after its input was edited",
                filter='kind = "approve" and edited = true'),
    ReviewQuery(name="expired_then_reasked", version=1,
                title="Decided on a call asked again after the same tool's call expired",
                filter='reasked = true and kind != "expire"'),
    ReviewQuery(name="outside_hours", version=1,
                title="Decided outside the tenant's working hours",
                filter='kind != "expire" and outside_hours(:tz, :start, :end, :days)',
                params=(_p("tz", "time zone", "UTC", "IANA time zone of the working hours"),
                        _p("start", "HH:MM", "09:00", "working hours start"),
                        _p("end", "HH:MM", "17:00", "working hours end"),
                        _p("days", "days", "mon-fri", "working days, e.g. mon-fri"))),
    ReviewQuery(name="revoked_actor", version=1,
                title="Decided by a principal whose key has since been revoked",
                filter="actor in (:revoked)",
                params=(_p("revoked", "principals", [], "deciders with no key in the server's "
                           "keys file now (the server computes it)", server=True),)),
    ReviewQuery(name="fingerprint_changed", version=1,
                title="Decided after the agent's fingerprint changed within the chat",
                filter="fingerprint_changed = true"),
    ReviewQuery(name="unviewed_approval", version=1,
                title="Approved without its actor having opened the call's page on that input",
                filter='kind in ("approve", "respond") and viewed = false'),
    ReviewQuery(name="large_amount", version=1,
                title="Tool input over a threshold on a field (input.amount > N)",
                filter="input.amount > :amount",
                params=(_p("amount", "number", 10000, "the threshold"),)),
    ReviewQuery(name="policy_withdrawn", version=1,
                title="Decided under a data policy version withdrawn since",
                filter="policy in (:withdrawn)",
                params=(_p("withdrawn", "policy versions", [], "the tenant's data policy "
                           "versions (id@n) withdrawn now (the server reads them)",
                           server=True),)),
)}


class BoundQuery(BaseModel):
    """A query ready to run: what it is (as a review records it) and its bound filter."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    version: int
    filter: str
    params: dict[str, Any]
    node: Any  # the bound AST (filters.Node)


def resolve(name: str, params: Mapping[str, Any] | None = None,
            custom: str | None = None) -> BoundQuery:
    """The shipped query `name` (or `custom` with its filter) bound to `params`."""
    given = dict(params or {})
    if name == CUSTOM:
        if not custom:
            raise InvalidFilterError("a custom query needs a filter")
        return _bound(CUSTOM, LANGUAGE_VERSION, custom, given)
    if custom is not None:
        raise InvalidFilterError(f"{name} is a shipped query; a filter goes with custom")
    query = SHIPPED.get(name)
    if query is None:
        raise UnknownReviewQueryError(name, [*sorted(SHIPPED), CUSTOM])
    known = {p.name for p in query.params}
    unknown = sorted(set(given) - known)
    if unknown:
        raise InvalidFilterError(f"{name} takes no parameter {unknown[0]!r}",
                                 known=sorted(known))
    values = {p.name: given.get(p.name, p.default) for p in query.params}
    return _bound(query.name, query.version, query.filter, values)


def _bound(name: str, version: int, text: str, params: dict[str, Any]) -> BoundQuery:
    node: Node = bind(parse(text), params)
    return BoundQuery(name=name, version=version, filter=text, params=params, node=node)
