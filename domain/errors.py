"""Typed domain errors: each has a `code`, and each category says the `status` it answers.

The status is a plain number on the category (what kind of refusal it is); the HTTP
layer reads it and nothing else, so an error without one fails the contract test.

InterlockError                        (a client's error: every subclass has code and status)
├── NotFoundError                 404
│   ├── ChatNotFoundError             chat_not_found
│   ├── ReviewNotFoundError           review_not_found
│   ├── DelegationNotFoundError       delegation_not_found
│   └── PolicyNotFoundError           policy_not_found
├── InvalidRequestError           422 invalid_request
│   ├── UnknownAgentError             unknown_agent
│   ├── IdempotencyKeyReusedError     idempotency_key_reused
│   ├── InvalidFilterError            invalid_filter (a review query's filter or parameter)
│   ├── UnknownReviewQueryError       unknown_review_query
│   └── InvalidPolicyError            invalid_policy (a data policy's document, naming the part)
├── ResumeError                   422
│   ├── EmptyResumeError              empty_resume
│   ├── DuplicateRefError             duplicate_ref
│   ├── UnknownInterruptError         unknown_interrupt
│   ├── InterruptNameMismatchError    interrupt_name_mismatch
│   ├── InvalidToolOutputError        invalid_tool_output
│   ├── InvalidToolInputError         invalid_tool_input
│   ├── NotAnApprovalError            not_an_approval
│   ├── ApprovalRequiredError         approval_required
│   ├── InterruptNotPendingError  409 interrupt_not_pending
│   ├── StaleInterruptError       409 stale_interrupt
│   ├── AlreadyVotedError         409 already_voted
│   └── InterruptExpiredError     409 interrupt_expired
├── ConflictError                 409
│   ├── ChatStateError
│   │   ├── PendingInterruptsError    pending_interrupts
│   │   ├── TurnInProgressError       turn_in_progress
│   │   ├── NothingToRetryError       nothing_to_retry
│   │   └── ChatErasedError           chat_erased (erased or erasing: no turn, decision or fork)
│   ├── ConcurrencyError              concurrent_modification
│   ├── ReviewStateError              review_state (not open, incomplete, assessed already)
│   └── PolicyStateError              policy_state (approved, withdrawn or superseded already)
├── AuthError                     403
│   ├── UnauthenticatedError      401 unauthenticated
│   └── ForbiddenError                forbidden
│       ├── SegregationOfDutiesError  segregation_of_duties (reviewer took part in the item)
│       ├── StageSegregationError     forbidden, reason other_stage (voted in another stage)
│       ├── ConflictingRolesError     forbidden, reason conflicting_roles (a toxic combination)
│       ├── SameSignerError           same_signer (the second sign-off by the first signer)
│       ├── FourEyesError             four_eyes (a policy version approved by its proposer)
│       └── PolicyAuthorError         policy_author (a vote by who changed the call's policy)
├── ModelError                    502 model_error
├── UnavailableError              503 (a transient refusal: answered with Retry-After)
│   └── StoreUnavailableError         store_unavailable
└── InternalError                 500 internal_error
    ├── TamperedEventError            (persistence.py: a stored event contradicts its record)
    ├── SnapshotRefusedError          (snapshots.py: never reaches a client; the log is read)
    └── PersonalDataLockedError       (erasure.py: encrypted data, no key store attached)

ConfigurationError (not an InterlockError): whoever configures the service made a mistake
(an unknown store URL, a model string no resolver can build, bad settings). It never reaches
a client as a 4xx: the CLI prints it and exits 2, a server refuses to start.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from interlock.domain.chat.canonical import wire_time


class InterlockError(Exception):
    """Base of every error a client can cause or observe."""

    code: ClassVar[str]  # set by each concrete error; unique across the tree
    status: ClassVar[int]  # set by each category; a concrete error may narrow it

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details


class ConfigurationError(Exception):
    """A mistake of whoever configures the service, not of a client."""


class NotFoundError(InterlockError):
    """The thing the request names does not exist (or is not the caller's to see)."""

    status = 404


class ChatNotFoundError(NotFoundError):
    code = "chat_not_found"

    def __init__(self, chat_id: object) -> None:
        super().__init__(f"chat {chat_id} not found", chat_id=str(chat_id))


class InvalidRequestError(InterlockError):
    """The request itself is malformed or names something that cannot be."""

    code = "invalid_request"
    status = 422


class UnknownAgentError(InvalidRequestError):
    code = "unknown_agent"

    def __init__(self, agent: str) -> None:
        super().__init__(f"no agent named {agent!r}", agent=agent)


class IdempotencyKeyReusedError(InvalidRequestError):
    code = "idempotency_key_reused"

    def __init__(self, key: str) -> None:
        super().__init__(f"Idempotency-Key {key!r} was used before with a different body", key=key)


class ReviewNotFoundError(NotFoundError):
    code = "review_not_found"

    def __init__(self, review_id: object) -> None:
        super().__init__(f"review {review_id} not found", review_id=str(review_id))


class DelegationNotFoundError(NotFoundError):
    code = "delegation_not_found"

    def __init__(self, delegation_id: object) -> None:
        super().__init__(f"delegation {delegation_id} not found",
                         delegation_id=str(delegation_id))


class PolicyNotFoundError(NotFoundError):
    code = "policy_not_found"

    def __init__(self, policy_id: str, version: int | None = None) -> None:
        what = policy_id if version is None else f"{policy_id} version {version}"
        super().__init__(f"policy {what} not found", policy_id=policy_id, version=version)


class InvalidPolicyError(InvalidRequestError):
    """A data policy's document is refused: `where` names the bad part (`stages[1].when`)."""

    code = "invalid_policy"

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"policy refused at {where}: {problem}", where=where, problem=problem)


class InvalidFilterError(InvalidRequestError):
    """A review query's filter or parameters are refused, with where and why."""

    code = "invalid_filter"

    def __init__(self, problem: str, *, position: int | None = None, **details: Any) -> None:
        where = f" (at character {position})" if position is not None else ""
        super().__init__(f"filter refused: {problem}{where}", problem=problem,
                         position=position, **details)


class UnknownReviewQueryError(InvalidRequestError):
    code = "unknown_review_query"

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"no review query named {name!r}", query=name, known=known)


class ResumeError(InterlockError):
    """A resume batch was refused; nothing was recorded."""

    status = 422


class EmptyResumeError(ResumeError):
    code = "empty_resume"

    def __init__(self) -> None:
        super().__init__(
            "a resume needs at least one entry: respond, restart, approve, edit or reject")


class DuplicateRefError(ResumeError):
    code = "duplicate_ref"

    def __init__(self, ref: str) -> None:
        super().__init__(f"ref {ref!r} appears more than once in one resume", ref=ref)


class UnknownInterruptError(ResumeError):
    code = "unknown_interrupt"

    def __init__(self, ref: str) -> None:
        super().__init__(f"no tool call with ref {ref!r} in this chat", ref=ref)


class InterruptNameMismatchError(ResumeError):
    code = "interrupt_name_mismatch"

    def __init__(self, ref: str, expected: str, given: str) -> None:
        super().__init__(
            f"ref {ref!r} is a {expected!r} interrupt, not {given!r}",
            ref=ref,
            expected=expected,
            given=given,
        )


class _SchemaRefusal(ResumeError):
    """A value the client gave fails a tool's schema; `errors` lists where and why."""

    template: ClassVar[str]

    def __init__(self, ref: str, tool: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(
            self.template.format(tool=tool, ref=ref), ref=ref, tool=tool, errors=errors
        )


class InvalidToolOutputError(_SchemaRefusal):
    code = "invalid_tool_output"
    template = "output for {tool!r} (ref {ref!r}) fails its output schema"


class InvalidToolInputError(_SchemaRefusal):
    code = "invalid_tool_input"
    template = "replace_input for {tool!r} (ref {ref!r}) fails its input schema"


class InterruptNotPendingError(ResumeError):
    code = "interrupt_not_pending"
    status = 409  # well-formed, but someone else decided first: a conflict

    def __init__(
        self,
        ref: str,
        decided_by: str | None,
        decided_at: datetime | None,
        decision: str | None,
    ) -> None:
        if decision is None:
            message = f"tool call {ref!r} is not a pending interrupt"
        else:
            message = f"interrupt {ref!r} was already decided ({decision}) by {decided_by}"
        super().__init__(
            message,
            ref=ref,
            decided_by=decided_by,
            decided_at=wire_time(decided_at) if decided_at else None,
            decision=decision,
        )


class StaleInterruptError(ResumeError):
    code = "stale_interrupt"
    status = 409  # the interrupt changed under the decision: a conflict

    def __init__(self, ref: str, expected: str | None, actual: str,
                 changed_by: str | None = None) -> None:
        if expected is None:  # named no input, and someone else replaced the requested one
            super().__init__(
                f"interrupt {ref!r} asks about an input {changed_by} put in place of the one"
                " requested; reload it and name the input you decide on (input_sha256)",
                ref=ref, expected_input_sha256=None, input_sha256=actual, changed_by=changed_by)
            return
        super().__init__(
            f"interrupt {ref!r} now asks about another input than the one decided on; reload it",
            ref=ref,
            expected_input_sha256=expected,
            input_sha256=actual,
        )


class NotAnApprovalError(ResumeError):
    code = "not_an_approval"

    def __init__(self, ref: str) -> None:
        super().__init__(
            f"{ref!r} is a tool's own interrupt, not an approval: respond or restart it", ref=ref)


class ApprovalRequiredError(ResumeError):
    code = "approval_required"

    def __init__(self, ref: str) -> None:
        super().__init__(
            f"{ref!r} awaits approval under its policy: approve, edit or reject it", ref=ref)


class AlreadyVotedError(ResumeError):
    code = "already_voted"
    status = 409

    def __init__(self, ref: str, actor: str, vote: str, at: datetime) -> None:
        super().__init__(
            f"{actor} already voted ({vote}) on this input of {ref!r}",
            ref=ref, actor=actor, vote=vote, voted_at=wire_time(at))


class InterruptExpiredError(ResumeError):
    code = "interrupt_expired"
    status = 409

    def __init__(self, ref: str, expired_at: datetime) -> None:
        super().__init__(
            f"interrupt {ref!r} expired at {wire_time(expired_at)}; it failed closed",
            ref=ref, expired_at=wire_time(expired_at))


class ConflictError(InterlockError):
    """The command is well-formed but the chat's current state refuses it."""

    status = 409


class ChatStateError(ConflictError):
    """The chat's status does not allow the command."""


class PendingInterruptsError(ChatStateError):
    code = "pending_interrupts"

    def __init__(self, refs: list[str]) -> None:
        super().__init__("the chat has pending interrupts; resume them first", refs=refs)


class TurnInProgressError(ChatStateError):
    code = "turn_in_progress"

    def __init__(self, chat_id: object | None = None) -> None:
        """`chat_id`: named when the client may not know it (a start sent again)."""
        if chat_id is None:
            super().__init__("a turn is in progress in this chat")
        else:
            super().__init__(f"the first turn of chat {chat_id} is in progress",
                             chat_id=str(chat_id))


class NothingToRetryError(ChatStateError):
    code = "nothing_to_retry"

    def __init__(self, status: str) -> None:
        super().__init__(
            f"only a failed or abandoned turn can be retried (status is {status})", status=status
        )


class ChatErasedError(ChatStateError):
    code = "chat_erased"

    def __init__(self, chat_id: object) -> None:
        super().__init__(
            f"chat {chat_id}'s personal data is erased or being erased: it takes no new"
            " message, decision, retry, withdrawal or fork",
            chat_id=str(chat_id),
        )


class ConcurrencyError(ConflictError):
    code = "concurrent_modification"
    fenced_from: int | None = None  # a delegated vote's: the chat's version its commit expected

    def __init__(self, chat_id: object) -> None:
        super().__init__(
            f"chat {chat_id} was changed by another request; reload and retry",
            chat_id=str(chat_id),
        )


class PolicyMovedError(ConcurrencyError):
    """A commit was refused because the tenant's data policies changed after a hold in it
    was judged (domain/services/policy_books.py): nothing of it was written. The turn
    service asks again; a stream answers it as a conflict (409 `concurrent_modification`:
    another request changed what the step depended on) and the client sends again."""

    def __init__(self, chat_id: object, stored: int) -> None:
        if stored:
            InterlockError.__init__(
                self, f"the tenant's data policies changed while a call of chat {chat_id} was "
                "asked; nothing of this step was recorded: send it again", chat_id=str(chat_id))
        else:  # a chat started with its first message: nothing of it was recorded
            InterlockError.__init__(
                self, "the tenant's data policies changed while a call of the chat being "
                "started was asked; no chat was recorded: send the request again")
        self.stored = stored  # the chat's stored version the refused commit built on
        self.since: int | None = None  # set by a resume: where its answer starts,
        self.version = 0  # and the chat's version before it


class AuthError(InterlockError):
    """Authentication or authorization refused."""

    status = 403


class UnauthenticatedError(AuthError):
    code = "unauthenticated"
    status = 401


class ForbiddenError(AuthError):
    code = "forbidden"


class SegregationOfDutiesError(ForbiddenError):
    """A reviewer may not assess an item they requested, edited or decided."""

    code = "segregation_of_duties"

    def __init__(self, review_id: object, item: int, actor: str, roles: list[str]) -> None:
        super().__init__(
            f"{actor} may not assess item {item} of review {review_id}: they "
            f"{' and '.join(roles)} it", review_id=str(review_id), item=item, actor=actor,
            reason="segregation", roles=roles)


class StageSegregationError(ForbiddenError):
    """Nobody votes in two stages of one call: `actor` voted in stage `voted` already."""

    def __init__(self, ref: str, actor: str, voted: str, stage: str) -> None:
        super().__init__(
            f"{actor} voted in stage \"{voted}\" of {ref}; someone else must decide stage"
            f" \"{stage}\"", ref=ref, actor=actor, reason="other_stage", voted_stage=voted,
            stage=stage)


class ConflictingRolesError(ForbiddenError):
    """The voter holds both roles of a pair the call's policy says conflict."""

    def __init__(self, ref: str, actor: str, roles: list[str]) -> None:
        super().__init__(
            f"{actor} holds the conflicting roles {' and '.join(roles)}; they may not decide"
            f" {ref}", ref=ref, actor=actor, reason="conflicting_roles", roles=list(roles))


class SameSignerError(ForbiddenError):
    """Under two signers, the second sign-off must come from another auditor than the first."""

    code = "same_signer"

    def __init__(self, review_id: object, actor: str) -> None:
        super().__init__(
            f"{actor} signed review {review_id} off already: a second, distinct auditor must "
            "sign it off", review_id=str(review_id), actor=actor, reason="same_signer")


class FourEyesError(ForbiddenError):
    """A data policy's version is approved by someone other than who proposed it."""

    code = "four_eyes"

    def __init__(self, policy_id: str, version: int, actor: str) -> None:
        super().__init__(
            f"{actor} proposed policy {policy_id} version {version}; someone else must approve"
            " it", policy_id=policy_id, version=version, actor=actor, reason="four_eyes")


class PolicyAuthorError(ForbiddenError):
    """Nobody decides a call whose policy version they proposed or approved."""

    code = "policy_author"

    def __init__(self, ref: str, actor: str, person: str, role: str, policy_id: str,
                 version: int) -> None:
        super().__init__(
            f"{person} {role} policy {policy_id} version {version}, which {ref} is held under;"
            " someone else must decide it", ref=ref, actor=actor, person=person,
            reason="policy_author", policy_id=policy_id, version=version, role=role)


class ReviewStateError(ConflictError):
    """The review's state refuses the step (closed, not signed off, an item assessed)."""

    code = "review_state"

    def __init__(self, review_id: object, message: str, **details: Any) -> None:
        super().__init__(f"review {review_id}: {message}", review_id=str(review_id), **details)


class ModelError(InterlockError):
    """The model upstream failed; the turn is recorded as failed and may be retried."""

    code = "model_error"
    status = 502


class UnavailableError(InterlockError):
    """The service cannot answer now, through nobody's fault: retry after `retry_after` s."""

    status = 503
    retry_after: int = 1


class StoreUnavailableError(UnavailableError):
    """The event store did not answer within the request's deadline; nothing was written
    by this request's unfinished step (a turn caught mid-way is retryable)."""

    code = "store_unavailable"

    def __init__(self, reason: str, retry_after: int = 1) -> None:
        super().__init__(f"the event store is unavailable ({reason}); retry shortly",
                         reason=reason)
        self.retry_after = retry_after


class InternalError(InterlockError):
    """A bug or a broken store, answered in the error shape; no client input causes one."""

    code = "internal_error"
    status = 500


class PolicyStateError(ConflictError):
    """The policy version's state refuses the step (approved, withdrawn already)."""

    code = "policy_state"

    def __init__(self, policy_id: str, version: int, state: str, step: str) -> None:
        super().__init__(f"policy {policy_id} version {version} is {state}: it cannot be {step}",
                         policy_id=policy_id, version=version, state=state, step=step)
