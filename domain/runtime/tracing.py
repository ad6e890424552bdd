"""The turn loop's tracing hooks: a protocol the edge implements (OpenTelemetry, say).

Without a tracer the loop pays one `is None` test per hook. Names and attributes follow the
OpenTelemetry GenAI semantic conventions; interrupts and decisions are span events, never
errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal, Protocol

from interlock.domain.chat import events as ev
from interlock.domain.chat.approval_events import (
    ApprovalVoted,
    InterruptExpired,
    InterruptWithdrawn,
)

Attr = str | int | float | bool
Operation = Literal["invoke_agent", "chat", "execute_tool"]

# A recorded decision, the span event it becomes and its kind (the decision log's), one line
# each. They are events on the `invoke_agent` span of the turn that carries them on; a vote
# that leaves its approval waiting runs no turn, so it has none (metrics and webhooks count it).
DECISION_EVENTS: dict[type[Any], tuple[str, Callable[[Any], str]]] = {
    ev.Responded: ("interlock.decision", lambda e: "respond"),
    ev.Restarted: ("interlock.decision", lambda e: "restart"),
    ApprovalVoted: ("interlock.decision", lambda e: str(e.vote)),  # approve, edit, reject
    InterruptWithdrawn: ("interlock.decision", lambda e: "withdraw"),
    InterruptExpired: ("interlock.expiry", lambda e: "expire"),
}


class Span(Protocol):
    """What the loop does with a span it opened."""

    def set(self, attributes: Mapping[str, Attr | None]) -> None: ...

    def event(self, name: str, attributes: Mapping[str, Attr | None]) -> None: ...

    def fail(self, error_type: str, message: str) -> None: ...


class Tracer(Protocol):
    """Opens a span as the current one for the duration of a `with` block."""

    def span(self, operation: Operation, name: str,
             attributes: Mapping[str, Attr | None]) -> AbstractContextManager[Span]: ...


class _NoSpan:
    def set(self, attributes: Mapping[str, Attr | None]) -> None:
        """Nothing to record."""

    def event(self, name: str, attributes: Mapping[str, Attr | None]) -> None:
        """Nothing to record."""

    def fail(self, error_type: str, message: str) -> None:
        """Nothing to record."""


NO_SPAN: Span = _NoSpan()
_NOTHING: AbstractContextManager[Span] = nullcontext(NO_SPAN)


def span(tracer: Tracer | None, operation: Operation, name: str,
         attributes: Mapping[str, Attr | None]) -> AbstractContextManager[Span]:
    """`tracer`'s span, or a shared do-nothing one when tracing is off."""
    if tracer is None:
        return _NOTHING
    return tracer.span(operation, name, attributes)


def decision_events(event: Any) -> tuple[str, dict[str, Attr | None]] | None:
    """The span event a pending domain event becomes, if it is a decision."""
    found = DECISION_EVENTS.get(type(event))
    if found is None:
        return None
    name, kind = found
    return name, {"interlock.interrupt.ref": event.ref, "interlock.decision": kind(event),
                  "gen_ai.tool.name": getattr(event, "name", None),
                  "interlock.actor": getattr(event, "actor", None),
                  "interlock.approval.outcome": getattr(event, "outcome", None)}
