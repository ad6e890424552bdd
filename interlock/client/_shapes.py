"""The JSON the read calls answer, as typed dicts: a reader's editor and mypy know the fields
(dates stay ISO-8601 text, as on the wire). tests/clients/test_shapes.py holds them to the
OpenAPI document, so a field added to the API and missing here fails a test."""

# No `from __future__ import annotations`: TypedDict on Python 3.11 must see NotRequired
# evaluated, or it takes every key for required.
from typing import Any, Generic, NotRequired, TypedDict, TypeVar

T = TypeVar("T")


class Page(TypedDict, Generic[T]):
    """A page of a list; `next_cursor` goes back as `cursor` for the next one."""

    items: list[T]
    next_cursor: NotRequired[str | None]


class ChatState(TypedDict):
    """GET /v1/chats/{id}: a chat now, or at `version`."""

    id: str
    agent: str
    tenant: str
    status: str
    version: int
    metadata: dict[str, Any] | None
    created_at: str
    updated_at: str
    finish_reason: str | None
    error: str | None
    messages: list[dict[str, Any]]
    interrupts: list[dict[str, Any]]


class DecisionRecord(TypedDict):
    """One row of the decision log (GET /v1/decisions)."""

    chat_id: str
    tenant: str
    agent: str
    ref: str
    tool: str
    kind: str
    original_input: NotRequired[Any]
    replaced_input: NotRequired[Any]
    output: NotRequired[Any]
    resumed_metadata: NotRequired[dict[str, Any] | None]
    actor: str
    input_sha256: str
    requested_at: str
    decided_at: str
    version: int
    fingerprint: NotRequired[str | None]
    stage: NotRequired[str | None]  # a staged call's vote: the stage it was cast in
    for_actor: NotRequired[str | None]  # a vote by delegation: for whom (actor: the delegate)
    delegation_id: NotRequired[str | None]
    policy: NotRequired[str | None]  # the data policy version it was held under ("id@n")


class InboxItem(TypedDict):
    """One pending interrupt of the inbox (GET /v1/interrupts)."""

    chat_id: str
    tenant: str
    agent: str
    ref: str
    tool: str
    input: NotRequired[Any]
    metadata: NotRequired[Any]
    requested_at: str
    requested_by: NotRequired[str | None]
    approval: NotRequired[dict[str, Any] | None]
    expires_at: NotRequired[str | None]
    stage: NotRequired[dict[str, Any] | None]  # a staged call: the stage it waits in
