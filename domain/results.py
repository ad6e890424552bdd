"""What commands answer: turn results, interrupts as clients see them, stream items."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.history import history
from interlock.domain.chat.ids import id_text
from interlock.domain.chat.messages import Message
from interlock.domain.chat.policies import ForkedCall
from interlock.domain.chat.stages import CurrentStage
from interlock.domain.chat.state import FinishReason, ToolCall


class Interrupt(BaseModel):
    model_config = ConfigDict(frozen=True)

    chat_id: str
    ref: str
    name: str
    input: Any = None
    metadata: Any = None  # the interrupt's payload: any JSON value
    requested_at: datetime
    input_sha256: str  # echo it in a resume entry to refuse a decision on a changed input
    approval: dict[str, Any] | None = None  # a held call: terms, votes so far, escalated
    forked_from: ForkedCall | None = None  # a fork's call, asked afresh: the call it copies
    stage: CurrentStage | None = None  # a staged policy's call: the stage it waits in

    @classmethod
    def of(cls, chat: Chat, call: ToolCall) -> Interrupt:
        return cls(
            chat_id=id_text(chat.id),
            ref=call.ref,
            name=call.name,
            input=call.input,
            input_sha256=sha256_hex(call.input),
            metadata=call.interrupt,
            requested_at=call.interrupted_at or call.requested_at,
            approval=call.approval.model_dump(mode="json") if call.approval else None,
            forked_from=call.forked,
            stage=call.approval.current_stage() if call.approval else None,
        )


class TurnResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    chat_id: str
    version: int
    finish_reason: FinishReason
    text: str
    message: Message | None
    messages: list[Message]
    interrupts: list[Interrupt]
    error: str | None = None
    position: int | None = None  # notification id of the last write, for read-your-writes

    @classmethod
    def of(cls, chat: Chat, since: int, position: int | None) -> TurnResult:
        appended = history(chat.state, since)
        models = [m for m in appended if m.role == "model"]
        last = models[-1] if models else None
        return cls(
            chat_id=id_text(chat.id),
            version=chat.version,
            finish_reason=chat.state.finish_reason or "stop",
            text=last.text if last else "",
            message=last,
            messages=appended,
            interrupts=[Interrupt.of(chat, c) for c in chat.pending_interrupts()],
            error=chat.state.error,
            position=position,
        )

    def closing_events(self) -> list[StreamEvent]:
        """What a stream ends with: each pending interrupt, then `turn_end`."""
        ending = self.model_dump(
            mode="json", include={"chat_id", "version", "finish_reason", "text", "error"}
        )
        return [
            *(
                StreamEvent(type="interrupt", data=i.model_dump(mode="json"))
                for i in self.interrupts
            ),
            StreamEvent(type="turn_end", data=ending),
        ]


StreamKind = Literal[
    "text", "tool_request", "tool_response", "tool_message", "interrupt", "turn_end"
]


class StreamEvent(BaseModel):
    """One Server-Sent Event of a streamed turn."""

    model_config = ConfigDict(frozen=True)

    type: StreamKind
    data: dict[str, Any]
