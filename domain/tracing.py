"""The turn loop's tracing hooks: a protocol the edge implements (OpenTelemetry, say).

Without a tracer the loop pays one `is None` test per hook. Names and attributes follow the
OpenTelemetry GenAI semantic conventions; interrupts and decisions are span events, never
errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal, Protocol

from interlock.domain import events as ev

Attr = str | int | float | bool
Operation = Literal["invoke_agent", "chat", "execute_tool"]

# A recorded decision and the span event it becomes; approvals' events (votes, expiry,
# withdrawal) are one line each here.
DECISION_EVENTS: dict[type[Any], tuple[str, str]] = {
    ev.Responded: ("interlock.decision", "respond"),
    ev.Restarted: ("interlock.decision", "restart"),
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
    return name, {"interlock.interrupt.ref": event.ref, "interlock.decision": kind,
                  "gen_ai.tool.name": getattr(event, "name", None),
                  "interlock.actor": getattr(event, "actor", None)}
