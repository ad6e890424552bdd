"""Typed exceptions, one per error code of the API, named as the server names them."""

from __future__ import annotations

import json
from typing import Any, ClassVar


class InterlockAPIError(Exception):
    """An error answer: its `code`, HTTP `status`, `message` and `details`."""

    code: ClassVar[str] = "error"

    def __init__(self, status: int, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {self.code}: {message}")
        self.status = status
        self.message = message
        self.details: dict[str, Any] = details or {}


class NotFoundError(InterlockAPIError):
    """A 404: no such chat or route."""


class ChatNotFoundError(NotFoundError):
    code = "chat_not_found"


class ReviewNotFoundError(NotFoundError):
    code = "review_not_found"


class DelegationNotFoundError(NotFoundError):
    code = "delegation_not_found"


class PolicyNotFoundError(NotFoundError):
    code = "policy_not_found"


class AssistantNotFoundError(NotFoundError):
    """Agent Protocol: no agent of that name on the server."""

    code = "assistant_not_found"


class RouteNotFoundError(NotFoundError):
    code = "not_found"


class MethodNotAllowedError(InterlockAPIError):
    code = "method_not_allowed"


class InvalidRequestError(InterlockAPIError):
    code = "invalid_request"


class UnknownAgentError(InvalidRequestError):
    code = "unknown_agent"


class IdempotencyKeyReusedError(InvalidRequestError):
    code = "idempotency_key_reused"


class InvalidPolicyError(InvalidRequestError):
    code = "invalid_policy"


class PayloadTooLargeError(InvalidRequestError):
    code = "payload_too_large"


class MetadataTooLargeError(InvalidRequestError):
    code = "metadata_too_large"


class TooManyForksError(InvalidRequestError):
    code = "too_many_forks"


class InvalidFilterError(InvalidRequestError):
    code = "invalid_filter"


class UnknownReviewQueryError(InvalidRequestError):
    code = "unknown_review_query"


class ResumeError(InterlockAPIError):
    """A resume batch was refused; nothing was recorded."""


class UnknownInterruptError(ResumeError):
    code = "unknown_interrupt"


class InterruptNameMismatchError(ResumeError):
    code = "interrupt_name_mismatch"


class DuplicateRefError(ResumeError):
    code = "duplicate_ref"


class EmptyResumeError(ResumeError):
    code = "empty_resume"


class InvalidToolOutputError(ResumeError):
    code = "invalid_tool_output"


class InvalidToolInputError(ResumeError):
    code = "invalid_tool_input"


class NotAnApprovalError(ResumeError):
    code = "not_an_approval"


class ApprovalRequiredError(ResumeError):
    code = "approval_required"


class ConflictError(InterlockAPIError):
    """A 409: the chat's state or a concurrent request refused the command."""


class InterruptNotPendingError(ConflictError):
    code = "interrupt_not_pending"


class StaleInterruptError(ConflictError):
    code = "stale_interrupt"


class AlreadyVotedError(ConflictError):
    code = "already_voted"


class InterruptExpiredError(ConflictError):
    code = "interrupt_expired"


class PendingInterruptsError(ConflictError):
    code = "pending_interrupts"


class TurnInProgressError(ConflictError):
    code = "turn_in_progress"


class ConcurrencyError(ConflictError):
    code = "concurrent_modification"


ConcurrentModificationError = ConcurrencyError  # the name before 0.2; same class


class NothingToRetryError(ConflictError):
    code = "nothing_to_retry"


class ChatErasedError(ConflictError):
    code = "chat_erased"


class AuthError(InterlockAPIError):
    """A 401 or 403: the key is missing or unknown, or the principal may not do this."""


class UnauthenticatedError(AuthError):
    code = "unauthenticated"


class ForbiddenError(AuthError):
    code = "forbidden"


class SegregationOfDutiesError(ForbiddenError):
    code = "segregation_of_duties"


class SameSignerError(ForbiddenError):
    code = "same_signer"


class FourEyesError(ForbiddenError):
    code = "four_eyes"


class PolicyAuthorError(ForbiddenError):
    code = "policy_author"


class ReviewStateError(ConflictError):
    code = "review_state"


class PolicyStateError(ConflictError):
    code = "policy_state"


class NoSigningKeyError(ConflictError):
    code = "no_signing_key"


class ModelError(InterlockAPIError):
    code = "model_error"


class ViewsBehindError(InterlockAPIError):
    code = "views_behind"


class StoreUnavailableError(InterlockAPIError):
    code = "store_unavailable"


class InternalError(InterlockAPIError):
    code = "internal_error"


def _subclasses(cls: type[InterlockAPIError]) -> list[type[InterlockAPIError]]:
    return [s for c in cls.__subclasses__() for s in (c, *_subclasses(c))]


BY_CODE: dict[str, type[InterlockAPIError]] = {
    c.code: c for c in _subclasses(InterlockAPIError) if "code" in vars(c)  # categories have none
}


def from_body(status: int, body: Any) -> InterlockAPIError:
    """The typed exception for an error body; unknown codes keep theirs on the base class."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return InterlockAPIError(status, str(body)[:500])
    code = str(error.get("code", "error"))
    cls = BY_CODE.get(code)
    if cls is None:
        exc = InterlockAPIError(status, str(error.get("message", "")), error.get("details"))
        exc.code = code  # type: ignore[misc]
        return exc
    return cls(status, str(error.get("message", "")), error.get("details"))


def from_text(status: int, text: str) -> InterlockAPIError:
    try:
        return from_body(status, json.loads(text))
    except ValueError:
        return InterlockAPIError(status, text[:500])
