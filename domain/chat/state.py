"""The Chat aggregate's state: what events build, what snapshots store."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, ValuesView
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field, GetCoreSchemaHandler, TypeAdapter
from pydantic_core import core_schema

from interlock.domain.chat.history_list import Messages, held_schema
from interlock.domain.chat.ids import id_text
from interlock.domain.chat.messages import Message, Part, ToolResponse
from interlock.domain.chat.policies import ApprovalState, ForkedCall, normalise_id

ChatStatus = Literal["idle", "running", "interrupted", "failed"]
FinishReason = Literal["stop", "interrupted", "max_turns", "failed"]
CallStatus = Literal[
    "requested", "completed", "failed", "interrupted", "responded", "restarted",
    "approved", "rejected", "expired", "withdrawn",
]
DecisionKind = Literal["respond", "restart", "approve", "edit", "reject", "expire", "withdraw"]
# Resolved: the model gets its response. Rejected, expired and withdrawn calls never ran;
# their response says why (`output` holds the structured outcome).
RESOLVED: frozenset[str] = frozenset(
    {"completed", "failed", "responded", "rejected", "expired", "withdrawn"}
)
RUNNABLE: frozenset[str] = frozenset({"requested", "restarted", "approved"})


class ToolCall(BaseModel):
    """One tool request of a model reply, through its whole life."""

    ref: str
    name: str
    input: Any = None
    turn: int
    requested_at: datetime
    requested_by: str | None = None
    input_by: str | None = None  # who last replaced the input: its requester from then on
    status: CallStatus = "requested"
    attempt: int = 1
    output: Any = None
    error: str | None = None
    interrupt: Any = None  # the interrupt's payload: any JSON value
    interrupted_at: datetime | None = None
    decision: DecisionKind | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    resumed: dict[str, Any] | None = None  # a restart's own metadata ({} for a bare one)
    resume_metadata: dict[str, Any] | None = None  # the metadata of the resume that answered it
    # the client's response part's metadata, as Genkit keeps it (None: {interruptResponse: true})
    response_metadata: dict[str, Any] | None = None
    original_input: Any = None
    approval: ApprovalState | None = None
    forked: ForkedCall | None = None  # a fork's call asked afresh: the call it copies

    @property
    def requester(self) -> str | None:
        """Who asked for this exact input: whoever last changed it, else who sent the turn."""
        return self.input_by or self.requested_by

    def requesters(self) -> set[str]:
        """Everyone four-eyes counts as asking for this input (normalised): its requester,
        and for a fork's call the source's requester and each forker (a fork is a new
        request by the one who forks)."""
        asked = {normalise_id(self.requester)} if self.requester else set()
        return (asked | self.forked.requesters()) if self.forked is not None else asked

    def idempotency_chat(self) -> UUID | None:
        """The chat whose idempotency key this call's runs use: a fork's call keeps its
        first source's (None: the chat's own)."""
        return None if self.forked is None else self.forked.key_chat_id

    def idempotency_key(self, chat_id: UUID, attempt: int | None = None) -> str:
        """The idempotency key of this call's run `attempt` (the current one by default) in
        chat `chat_id`: a tool's side effects, and a sub-agent's chat id, are keyed by it."""
        chat = self.idempotency_chat() or chat_id
        return f"{id_text(chat)}:{self.ref}:{self.attempt if attempt is None else attempt}"

    @property
    def awaiting_approval(self) -> bool:
        return (self.status == "interrupted" and self.approval is not None
                and self.approval.outcome == "pending")

    def response_output(self) -> Any:
        """What the model is told: the output, or `{"error": ...}` for a failed call."""
        if self.status == "failed":
            return {"error": self.error}
        return self.output

    def response_part(self) -> Part:
        """The tool response part; a failure is flagged in its metadata, never by its shape."""
        return Part(
            tool_response=ToolResponse(ref=self.ref, name=self.name, output=self.response_output()),
            metadata={"failed": True} if self.status == "failed" else None,
        )


class Calls(MutableMapping[str, ToolCall]):
    """Every tool call of the chat by ref, in request order.

    A long chat has thousands of calls, and decoding them all takes longer than loading the
    rest of its state. A snapshot hands over the calls of earlier turns (`_held`, settled:
    a new turn starts only once the last one is over) as the JSON object `_held_json`, and
    they are decoded, all at once, when one of them is read or changed. Their refs are known
    without decoding: a lookup of a ref that is not there, a new ref's uniqueness, a count.
    """

    __slots__ = ("_below", "_held", "_held_json", "_items")

    def __init__(self, items: Mapping[str, ToolCall] | None = None) -> None:
        self._items: dict[str, ToolCall] = dict(items or {})
        self._held: dict[str, None] = {}  # the undecoded refs, in order
        self._held_json = b"{}"
        self._below = 0  # every held call is of a turn before this one

    @classmethod
    def from_json(cls, held: list[str], held_json: bytes, below: int, live_json: bytes) -> Calls:
        """The calls `held` (of turns before `below`, left as the JSON object `held_json`
        until one is read), then the JSON object `live_json`, decoded now."""
        calls = cls(_CALLS.validate_json(live_json))
        if held:
            calls._held, calls._held_json, calls._below = dict.fromkeys(held), held_json, below
        return calls

    def split_json(self, turn: int) -> tuple[list[str], bytes, bytes]:
        """What a snapshot at turn `turn` stores: the refs of the calls of earlier turns, those
        calls as a JSON object, and the others as a JSON object."""
        settled = {ref: c for ref, c in self._items.items() if c.turn < turn}
        live = {ref: c for ref, c in self._items.items() if c.turn >= turn}
        held_json = self._held_json
        if settled:
            more = _CALLS.dump_json(settled)
            held_json = more if not self._held else held_json[:-1] + b"," + more[1:]
        return [*self._held, *settled], held_json, _CALLS.dump_json(live)

    @property
    def decoded(self) -> bool:
        return not self._held

    def of_turn(self, turn: int) -> list[ToolCall]:
        """The calls of `turn` (decoding none when it is later than the held ones)."""
        calls = self._items.values() if turn >= self._below else self.values()
        return [c for c in calls if c.turn == turn]

    def __getitem__(self, ref: str) -> ToolCall:
        if ref in self._held:
            self.decode()
        return self._items[ref]

    def __setitem__(self, ref: str, call: ToolCall) -> None:
        if ref in self._held:
            self.decode()
        self._items[ref] = call

    def __delitem__(self, ref: str) -> None:
        if ref in self._held:
            self.decode()
        del self._items[ref]

    def __contains__(self, ref: object) -> bool:
        return ref in self._items or ref in self._held

    def __iter__(self) -> Iterator[str]:
        return iter([*self._held, *self._items])

    def __len__(self) -> int:
        return len(self._held) + len(self._items)

    def values(self) -> ValuesView[ToolCall]:
        return self._all().values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Calls):
            return self._all() == other._all()
        if isinstance(other, dict):
            return self._all() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dict

    def __repr__(self) -> str:
        return f"Calls({len(self)} calls, {len(self._held)} undecoded)"

    def decode(self) -> None:
        """Decode the settled calls now, not at their first read (a bad one raises here)."""
        if self._held:
            self._items = {**_CALLS.validate_json(self._held_json), **self._items}
            self._held, self._held_json, self._below = {}, b"{}", 0

    def _all(self) -> dict[str, ToolCall]:
        self.decode()
        return self._items

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return held_schema(cls, handler.generate_schema(dict[str, ToolCall]))


_CALLS: TypeAdapter[dict[str, ToolCall]] = TypeAdapter(dict[str, ToolCall])


class KeyUse(BaseModel):
    """A resume's Idempotency-Key: the body it came with and where its turn began."""

    request_sha256: str
    version: int
    since: int


class ChatState(BaseModel):
    agent: str
    tenant: str
    started_by: str
    metadata: dict[str, Any] = {}
    created_at: datetime
    updated_at: datetime
    status: ChatStatus = "idle"
    messages: Messages = Field(default_factory=Messages)
    calls: Calls = Field(default_factory=Calls)
    batch: list[str] = []
    batch_closed: bool = True
    turn: int = 0
    turn_by: str | None = None
    finish_reason: FinishReason | None = None
    error: str | None = None
    chain_tip: str | None = None
    fingerprint: str | None = None  # of the agent, as last recorded
    # A fork whose copied history was erased: what its later events say of those calls is
    # gone with it (ChatEvent.mutate), and the fork still loads.
    forgotten: bool = False
    resume_keys: dict[str, KeyUse] = {}
    erasing: bool = False  # its erasure began: no fork of it is recorded from then on

    def remember_key(self, key: str | None, request_sha256: str | None, version: int) -> None:
        if key is not None and request_sha256 is not None and key not in self.resume_keys:
            self.resume_keys[key] = KeyUse(
                request_sha256=request_sha256, version=version, since=len(self.messages)
            )

    def close_batch_if_resolved(self) -> None:
        """Once every call of the reply is resolved, add the tool message (request order)."""
        calls = [self.calls[ref] for ref in self.batch]
        if self.batch_closed or not all(c.status in RESOLVED for c in calls):
            return
        self.batch_closed = True
        self.messages.append(Message(role="tool", content=[c.response_part() for c in calls]))
