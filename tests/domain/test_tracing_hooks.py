"""The turn loop's tracing hooks, with a recording tracer (no OpenTelemetry involved)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from interlock.domain import ModelResponse, Usage
from interlock.domain.runtime.tracing import Attr, Operation, Span
from tests.kit import make_app, run, say


class Recorded:
    def __init__(self, operation: str, name: str, attributes: Mapping[str, Any]) -> None:
        self.operation, self.name = operation, name
        self.attributes: dict[str, Any] = dict(attributes)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.failed: tuple[str, str] | None = None

    def set(self, attributes: Mapping[str, Attr | None]) -> None:
        self.attributes.update(attributes)

    def event(self, name: str, attributes: Mapping[str, Attr | None]) -> None:
        self.events.append((name, dict(attributes)))

    def fail(self, error_type: str, message: str) -> None:
        self.failed = (error_type, message)


class Recorder:
    def __init__(self) -> None:
        self.spans: list[Recorded] = []

    @contextmanager
    def span(self, operation: Operation, name: str,
             attributes: Mapping[str, Attr | None]) -> Iterator[Span]:
        self.spans.append(Recorded(operation, name, attributes))
        yield self.spans[-1]


def test_token_usage_is_set_on_the_chat_span() -> None:
    reply = say("hello").model_copy(update={"usage": Usage(input_tokens=12, output_tokens=3)})
    assert isinstance(reply, ModelResponse)
    service, _, _ = make_app("memory://", [reply])
    service.tracer = recorder = Recorder()
    chat = service.start_chat("ops", actor="a")
    run(service.send(chat.id, "hi", actor="a"))
    [turn, model] = recorder.spans
    assert (turn.operation, model.operation) == ("invoke_agent", "chat")
    assert model.attributes["gen_ai.usage.input_tokens"] == 12
    assert model.attributes["gen_ai.usage.output_tokens"] == 3
    assert turn.attributes["interlock.finish_reason"] == "stop" and model.failed is None


def test_a_failing_tool_fails_its_span_and_an_interrupt_does_not() -> None:
    from tests.kit import call

    service, _, _ = make_app("memory://", [call(("boom", {"key": "x"}), ("approve",
                                                                        {"action": "go"}))])
    service.tracer = recorder = Recorder()
    chat = service.start_chat("ops", actor="a")
    run(service.send(chat.id, "hi", actor="a"))
    tools = {s.name: s for s in recorder.spans if s.operation == "execute_tool"}
    assert tools["execute_tool boom"].failed == ("tool_error", "RuntimeError: boom x")
    approve = tools["execute_tool approve"]
    assert approve.failed is None and [n for n, _ in approve.events] == ["interlock.interrupt"]
