"""Reviews' use cases: open from a query's population, assess, sign off, close; each
loads the review, calls it, seals and commits its events in the chats' event store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from interlock.domain.application import Interlock
from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.state import ToolCall
from interlock.domain.errors import InvalidRequestError, ReviewNotFoundError
from interlock.domain.review.aggregate import Review
from interlock.domain.review.events import QueryRecord, ReviewItem, SampleRecord, Severity, Verdict
from interlock.domain.review.sampling import (
    METHOD,
    Candidate,
    Method,
    check_method,
    check_seed,
    check_spec,
)
from interlock.domain.storage.repository import replay


class Reviews:
    """Reviews stored beside the chats, sealed with the same keys, read by the same views."""

    def __init__(self, app: Interlock) -> None:
        self.app = app

    def open(self, *, tenant: str, actor: str, query: QueryRecord, drawn: Sequence[Candidate],
             strata_sizes: Mapping[str, int], size: int, strata: Sequence[str],
             seed: str, method: Method = METHOD, signers: int = 1) -> Review:
        """Open a review of the `drawn` sample (sampling.py's rule, `seed`, `strata_sizes`)."""
        check_spec(size, strata)
        check_seed(seed)
        sample = SampleRecord(size=size, strata=tuple(strata), seed=seed,
                              population=sum(strata_sizes.values()),
                              strata_sizes=dict(strata_sizes), method=check_method(method))
        review = Review.open(tenant=tenant, actor=actor, query=query, sample=sample,
                             items=self._items(tenant, drawn), signers=signers)
        self.save(review)
        return review

    def get(self, review_id: UUID, *, tenant: str | None = None) -> Review:
        """The review; another tenant's review, or a chat's id, is not found."""
        try:
            found = self.app.repository.get(review_id, projector_func=replay)
        except AggregateNotFoundError:
            raise ReviewNotFoundError(review_id) from None
        if not isinstance(found, Review) or tenant not in (None, found.state.tenant):
            raise ReviewNotFoundError(review_id)
        return found

    def assess(self, review_id: UUID, item: int, *, actor: str, verdict: Verdict, note: str,
               severity: Severity | None = None, tenant: str | None = None) -> Review:
        review = self.get(review_id, tenant=tenant)
        recorded = review.item(item)
        key = Candidate(recorded.chat_id, recorded.version, recorded.ref, recorded.kind,
                        recorded.actor)
        now = self._items(review.state.tenant, [key])[0]
        review.assess(item, actor=actor, verdict=verdict, note=note, severity=severity,
                      now=now.model_copy(update={"n": item}))
        self.save(review)
        return review

    def sign_off(self, review_id: UUID, *, actor: str, note: str = "",
                 tenant: str | None = None) -> Review:
        review = self.get(review_id, tenant=tenant)
        review.sign_off(actor=actor, note=note)
        self.save(review)
        return review

    def close(self, review_id: UUID, *, actor: str, tenant: str | None = None) -> Review:
        review = self.get(review_id, tenant=tenant)
        review.close(actor=actor)
        self.save(review)
        return review

    def _items(self, tenant: str, drawn: Sequence[Candidate]) -> list[ReviewItem]:
        """Each drawn decision with who took part in its call, read from the chat's log."""
        chats = self.app.store.get_many(list({UUID(c.chat_id) for c in drawn}))
        return [_item(n, c, chats.get(UUID(c.chat_id)), tenant)
                for n, c in enumerate(drawn, start=1)]

    def save(self, review: Review) -> int | None:
        """Seal and append the review's new events; the position of the last."""
        review.seal(self.app.sealer.sign)
        return self.app.store.append(review.id, review.collect_events())


def _item(n: int, candidate: Candidate, chat: Chat | None, tenant: str) -> ReviewItem:
    if chat is None or chat.state.tenant != tenant or candidate.ref not in chat.state.calls:
        raise InvalidRequestError(f"decision {candidate.key} is not in the log of tenant "
                                  f"{tenant}", chat_id=candidate.chat_id)
    call = chat.state.calls[candidate.ref]
    editors, deciders = _editors(call), _deciders(call)
    return ReviewItem(n=n, chat_id=candidate.chat_id, version=candidate.version,
                      ref=candidate.ref, tool=call.name, kind=candidate.kind,
                      actor=candidate.actor, requested_by=_some(call.requested_by),
                      edited_by=editors, decided_by=deciders)


def _some(*who: str | None) -> tuple[str, ...]:
    return tuple(sorted({w for w in who if w}))


def _editors(call: ToolCall) -> tuple[str, ...]:
    votes = call.approval.votes if call.approval is not None else []
    return _some(call.input_by, *(v.actor for v in votes if v.kind == "edit"))


def _deciders(call: ToolCall) -> tuple[str, ...]:
    votes = call.approval.votes if call.approval is not None else []
    return _some(call.decided_by, *(v.actor for v in votes))
