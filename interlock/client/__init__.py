"""Python client for Interlock's HTTP API v1, sync (`Client`) and async (`AsyncClient`).

client = Client("http://127.0.0.1:8000", api_key="...")
chat = client.chat("bankingAgent")
res = chat.send("Transfer $500 to savings.")
if res.finish_reason == "interrupted":
    res = chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
"""

from interlock.client._async import AsyncChat, AsyncClient
from interlock.client._errors import (
    AuthError,
    ChatNotFoundError,
    ConcurrencyError,
    ConcurrentModificationError,
    ConflictError,
    DuplicateRefError,
    EmptyResumeError,
    ForbiddenError,
    IdempotencyKeyReusedError,
    InterlockAPIError,
    InternalError,
    InterruptNameMismatchError,
    InterruptNotPendingError,
    InvalidRequestError,
    InvalidToolInputError,
    InvalidToolOutputError,
    MethodNotAllowedError,
    ModelError,
    NotFoundError,
    NothingToRetryError,
    PayloadTooLargeError,
    PendingInterruptsError,
    ResumeError,
    RouteNotFoundError,
    StaleInterruptError,
    TurnInProgressError,
    UnauthenticatedError,
    UnknownAgentError,
    UnknownInterruptError,
    ViewsBehindError,
)
from interlock.client._models import Interrupt, Respond, Restart, StreamEvent, TurnResult
from interlock.client._sync import Chat, Client

__all__ = [
    "AsyncChat",
    "AsyncClient",
    "AuthError",
    "Chat",
    "ChatNotFoundError",
    "Client",
    "ConcurrencyError",
    "ConcurrentModificationError",
    "ConflictError",
    "DuplicateRefError",
    "EmptyResumeError",
    "ForbiddenError",
    "IdempotencyKeyReusedError",
    "InterlockAPIError",
    "InternalError",
    "Interrupt",
    "InterruptNameMismatchError",
    "InterruptNotPendingError",
    "InvalidRequestError",
    "InvalidToolInputError",
    "InvalidToolOutputError",
    "MethodNotAllowedError",
    "ModelError",
    "NotFoundError",
    "NothingToRetryError",
    "PayloadTooLargeError",
    "PendingInterruptsError",
    "Respond",
    "Restart",
    "ResumeError",
    "RouteNotFoundError",
    "StaleInterruptError",
    "StreamEvent",
    "TurnInProgressError",
    "TurnResult",
    "UnauthenticatedError",
    "UnknownAgentError",
    "UnknownInterruptError",
    "ViewsBehindError",
]
