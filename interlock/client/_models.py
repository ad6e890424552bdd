"""What the client hands back: turn results, interrupts with their decision builders, events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Respond:
    """Supply the tool's output; the server does not run the tool."""

    ref: str
    name: str
    output: Any = None
    metadata: dict[str, Any] | None = None
    input_sha256: str | None = None

    def wire(self) -> dict[str, Any]:
        body = {"ref": self.ref, "name": self.name, "output": self.output}
        if self.metadata is not None:
            body["metadata"] = self.metadata
        if self.input_sha256 is not None:
            body["input_sha256"] = self.input_sha256
        return body


@dataclass(frozen=True)
class Restart:
    """Run the tool again on the server, with its original input or `replace_input`."""

    ref: str
    name: str
    resumed_metadata: dict[str, Any] | None = None
    replace_input: Any = UNSET
    input_sha256: str | None = None

    def wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ref": self.ref, "name": self.name}
        if self.input_sha256 is not None:
            body["input_sha256"] = self.input_sha256
        if self.resumed_metadata is not None:
            body["resumed_metadata"] = self.resumed_metadata
        if self.replace_input is not UNSET:
            body["replace_input"] = self.replace_input
        return body


@dataclass(frozen=True)
class Approve:
    """A yes vote on a call held for approval."""

    ref: str
    name: str
    input_sha256: str | None = None

    def wire(self) -> dict[str, Any]:
        return query({"ref": self.ref, "name": self.name, "input_sha256": self.input_sha256})


@dataclass(frozen=True)
class Edit:
    """A changed input for a held call; someone other than its author must approve it."""

    ref: str
    name: str
    input: Any
    reason: str
    input_sha256: str | None = None

    def wire(self) -> dict[str, Any]:
        body = {"ref": self.ref, "name": self.name, "input": self.input, "reason": self.reason}
        return {**body, **query({"input_sha256": self.input_sha256})}


@dataclass(frozen=True)
class Reject:
    """A no vote; the model is told who and why."""

    ref: str
    name: str
    reason: str
    input_sha256: str | None = None

    def wire(self) -> dict[str, Any]:
        body = {"ref": self.ref, "name": self.name, "reason": self.reason}
        return {**body, **query({"input_sha256": self.input_sha256})}


Decision = Respond | Restart | Approve | Edit | Reject
_FIELD = {Respond: "respond", Restart: "restart", Approve: "approve", Edit: "edit",
          Reject: "reject"}


@dataclass(frozen=True)
class Interrupt:
    """A paused tool request awaiting the client's decision."""

    chat_id: str
    ref: str
    name: str
    input: Any = None
    metadata: Any = None  # the interrupt's payload: any JSON value
    requested_at: str | None = None
    input_sha256: str | None = None
    approval: dict[str, Any] | None = None  # a held call: terms, votes so far, escalated
    stage: dict[str, Any] | None = None  # a staged policy's call: the stage it waits in

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Interrupt:
        return cls(
            approval=data.get("approval"),
            stage=data.get("stage"),
            chat_id=data["chat_id"],
            ref=data["ref"],
            name=data["name"],
            input=data.get("input"),
            metadata=data.get("metadata"),
            requested_at=data.get("requested_at"),
            input_sha256=data.get("input_sha256"),
        )

    def respond(self, output: Any, metadata: dict[str, Any] | None = None) -> Respond:
        """Decide on exactly this input: a changed interrupt refuses it (stale_interrupt)."""
        return Respond(self.ref, self.name, output, metadata, self.input_sha256)

    def restart(
        self, replace_input: Any = UNSET, resumed_metadata: dict[str, Any] | None = None
    ) -> Restart:
        return Restart(self.ref, self.name, resumed_metadata, replace_input, self.input_sha256)

    def approve(self) -> Approve:
        """Vote yes on exactly this input."""
        return Approve(self.ref, self.name, self.input_sha256)

    def edit(self, input: Any, reason: str) -> Edit:
        """Propose another input, saying why; it runs once others approve it."""
        return Edit(self.ref, self.name, input, reason, self.input_sha256)

    def reject(self, reason: str) -> Reject:
        """Vote no; the tool does not run and the model is told why."""
        return Reject(self.ref, self.name, reason, self.input_sha256)


@dataclass(frozen=True)
class TurnResult:
    """One turn: `messages` it appended (Genkit JSON), `interrupts` pending after it."""

    chat_id: str
    version: int
    finish_reason: str
    text: str
    message: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    interrupts: list[Interrupt] = field(default_factory=list)
    error: str | None = None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> TurnResult:
        return cls(
            chat_id=data["chat_id"],
            version=data["version"],
            finish_reason=data["finish_reason"],
            text=data.get("text", ""),
            message=data.get("message"),
            messages=data.get("messages", []),
            interrupts=[Interrupt.parse(i) for i in data.get("interrupts", [])],
            error=data.get("error"),
        )

    @classmethod
    def opened(cls, state: dict[str, Any]) -> TurnResult:
        """The first turn of a chat opened with its message (`Client.start`), read from the
        chat's state the server answered: its messages are the chat's, all of them."""
        models = [m for m in state.get("messages", []) if m.get("role") == "model"]
        last = models[-1] if models else None
        parts = last.get("content", []) if last else []
        text = "".join(p["text"] for p in parts if isinstance(p.get("text"), str))
        return cls.parse({**state, "chat_id": state["id"], "text": text, "message": last,
                          "finish_reason": state.get("finish_reason") or "stop"})


@dataclass(frozen=True)
class StreamEvent:
    """One Server-Sent Event: text, tool_request, tool_response, tool_message, interrupt or
    turn_end."""

    type: str
    data: dict[str, Any]

    @property
    def interrupt(self) -> Interrupt | None:
        return Interrupt.parse(self.data) if self.type == "interrupt" else None


def resume_body(
    respond: list[Respond],
    restart: list[Restart],
    metadata: dict[str, Any] | None = None,
    max_turns: int | None = None,
) -> dict[str, Any]:
    """A resume's body; `metadata` is the resume's own, `max_turns` its tool-round budget."""
    body: dict[str, Any] = {
        "respond": [r.wire() for r in respond],
        "restart": [r.wire() for r in restart],
    }
    return {**body, **query({"metadata": metadata, "max_turns": max_turns})}


def decide_body(decisions: list[Decision], metadata: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """A resume body from decisions of any kind, mixed in one batch."""
    body: dict[str, Any] = {}
    for d in decisions:
        body.setdefault(_FIELD[type(d)], []).append(d.wire())
    return {**body, **query({"metadata": metadata})}


def message_body(text: str, max_turns: int | None = None) -> dict[str, Any]:
    return {"text": text, **query({"max_turns": max_turns})}


def start_body(agent: str, text: str, metadata: dict[str, Any] | None,
               max_turns: int | None) -> dict[str, Any]:
    return {"agent": agent, **message_body(text, max_turns), **query({"metadata": metadata})}


STREAM = {"Accept": "text/event-stream"}


def query(filters: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in filters.items() if v is not None}


def key_header(idempotency_key: str | None) -> dict[str, str]:
    return {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}
