"""Spans and their attributes for a full interrupt cycle (in-memory exporter)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.api.observability.tracing import OtelTracer
from interlock.domain import Interlock
from interlock.projections import SqlReadModels
from interlock.projections.interface import ReadModels
from interlock.sweeper import Sweeper
from tests.api.conftest import KEYS
from tests.observability.conftest import auth, hold_payment

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traced(service: Interlock, views: ReadModels,
           spans: InMemorySpanExporter) -> Iterator[TestClient]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    app = make_app(service, views, AuthConfig.from_mapping(KEYS),
                   tracer=provider.get_tracer("test"))
    with TestClient(app) as client:
        yield client


def _named(spans: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name.startswith(prefix)]


def test_a_full_interrupt_cycle_is_traced(
    traced: TestClient, spans: InMemorySpanExporter
) -> None:
    chat = traced.post("/v1/chats", json={"agent": "bankingAgent"}, headers=auth("dana")).json()
    sent = traced.post(f"/v1/chats/{chat['id']}/messages", json={
        "text": "Transfer $500 to savings."}, headers={**auth("dana"), "traceparent": PARENT})
    [ask] = sent.json()["interrupts"]

    [turn] = _named(spans, "invoke_agent")
    attrs = dict(turn.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert (attrs["gen_ai.agent.name"], attrs["gen_ai.conversation.id"]) == (
        "bankingAgent", chat["id"])
    assert attrs["interlock.finish_reason"] == "interrupted"
    assert format(turn.context.trace_id, "032x") == TRACE_ID  # the caller's trace flows in
    [server] = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER
                and s.context.trace_id == turn.context.trace_id]
    assert turn.parent is not None and turn.parent.span_id == server.context.span_id
    assert server.name == "POST /v1/chats/{chat_id}/messages"
    [model] = _named(spans, "chat ")
    assert model.kind == SpanKind.CLIENT and model.parent is not None
    assert model.parent.span_id == turn.context.span_id
    assert dict(model.attributes or {})["gen_ai.request.model"] == "banking-script"
    [tool] = _named(spans, "execute_tool")
    tool_attrs = dict(tool.attributes or {})
    assert (tool_attrs["gen_ai.tool.name"], tool_attrs["gen_ai.tool.call.id"]) == (
        "userApproval", ask["ref"])
    assert [e.name for e in tool.events] == ["interlock.interrupt"]
    assert tool.status.status_code != StatusCode.ERROR  # an interrupt is not an error

    spans.clear()
    decide = {"respond": [{"ref": ask["ref"], "name": ask["name"], "output": {"approved": True}}]}
    done = traced.post(f"/v1/chats/{chat['id']}/resume", json=decide, headers=auth("bob"))
    assert done.json()["finish_reason"] == "stop"

    [resumed] = _named(spans, "invoke_agent")
    [decision] = resumed.events
    assert decision.name == "interlock.decision"
    assert dict(decision.attributes or {}) == {
        "interlock.interrupt.ref": ask["ref"], "interlock.decision": "respond",
        "gen_ai.tool.name": "userApproval", "interlock.actor": "bob"}
    assert dict(resumed.attributes or {})["interlock.finish_reason"] == "stop"
    # a responded interrupt does not run again; the transfer it approved does
    assert [s.name for s in _named(spans, "execute_tool")] == ["execute_tool transferMoney"]
    assert all(s.parent is not None and s.parent.span_id == resumed.context.span_id
               for s in _named(spans, "chat ") + _named(spans, "execute_tool"))
    assert all(s.status.status_code != StatusCode.ERROR for s in spans.get_finished_spans())


def test_a_model_failure_is_an_error_span(traced: TestClient, spans: InMemorySpanExporter,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.api.agents import FLAKY_DOWN

    FLAKY_DOWN.set()
    try:
        chat = traced.post("/v1/chats", json={"agent": "flakyAgent"}, headers=auth("dana")).json()
        traced.post(f"/v1/chats/{chat['id']}/messages", json={"text": "hi"},
                    headers=auth("dana"))
    finally:
        FLAKY_DOWN.clear()
    [model] = _named(spans, "chat ")
    assert model.status.status_code == StatusCode.ERROR
    assert dict(model.attributes or {})["error.type"] == "ModelError"
    [turn] = _named(spans, "invoke_agent")
    assert dict(turn.attributes or {})["interlock.finish_reason"] == "failed"


def test_tracing_is_off_unless_configured(http: TestClient, service: Interlock) -> None:
    assert service.tracer is None
    assert http.app.state.observed.spans is None  # type: ignore[attr-defined]


def _events(spans: InMemorySpanExporter) -> list[tuple[str, dict[str, Any]]]:
    [turn] = _named(spans, "invoke_agent")
    return [(e.name, dict(e.attributes or {})) for e in turn.events]


def test_votes_withdrawals_and_expiries_are_span_events(
    traced: TestClient, spans: InMemorySpanExporter, service: Interlock, views: ReadModels
) -> None:
    chat, held = hold_payment(traced, "payAgent")
    vote = {"approve": [{"ref": held["ref"], "name": "pay"}]}
    traced.post(f"/v1/chats/{chat}/resume", json=vote, headers=auth("tina"))
    spans.clear()  # tina's vote leaves the approval waiting: no turn runs, no span
    traced.post(f"/v1/chats/{chat}/resume", json=vote, headers=auth("tom"))
    assert _events(spans) == [("interlock.decision", {
        "interlock.interrupt.ref": held["ref"], "interlock.decision": "approve",
        "gen_ai.tool.name": "pay", "interlock.actor": "tom",
        "interlock.approval.outcome": "approved"})]

    chat, held = hold_payment(traced, "payAgent")
    spans.clear()
    traced.post(f"/v1/chats/{chat}/withdraw", json={"refs": [held["ref"]], "reason": "no"},
                headers=auth("alice"))
    assert _events(spans) == [("interlock.decision", {
        "interlock.interrupt.ref": held["ref"], "interlock.decision": "withdraw",
        "interlock.actor": "alice"})]

    chat, held = hold_payment(traced, "hastyPayAgent")
    traced.get("/v1/interrupts", headers=auth("dana"))  # the views are current
    spans.clear()
    assert isinstance(views, SqlReadModels) and Sweeper(service, views).sweep() == 1
    assert _events(spans) == [("interlock.expiry", {
        "interlock.interrupt.ref": held["ref"], "interlock.decision": "expire"})]
    assert all(s.status.status_code != StatusCode.ERROR for s in spans.get_finished_spans())


def test_a_span_is_current_in_its_block_and_an_escaping_error_is_recorded() -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = OtelTracer(provider.get_tracer("test"))
    asked = {"gen_ai.tool.name": "t", "gen_ai.tool.call.id": None}
    with pytest.raises(ValueError), tracer.span("execute_tool", "execute_tool t", asked):
        with tracer.span("chat", "chat m", {}):
            assert trace.get_current_span().name == "chat m"  # type: ignore[attr-defined]
        assert trace.get_current_span().name == "execute_tool t"  # type: ignore[attr-defined]
        raise ValueError("boom")
    assert not trace.get_current_span().is_recording()  # detached again
    with tracer.span("chat", "chat m", {}) as failed:
        failed.fail("ModelError", "openai: 503")
    model, tool, after = spans.get_finished_spans()
    assert model.parent is not None and model.parent.span_id == tool.context.span_id
    assert model.kind == SpanKind.CLIENT and tool.kind == SpanKind.INTERNAL
    assert dict(tool.attributes or {}) == {"gen_ai.tool.name": "t"}  # None is left out
    assert tool.status.status_code == StatusCode.ERROR
    assert tool.status.description == "ValueError: boom"
    assert [e.name for e in tool.events] == ["exception"]
    assert after.parent is None and after.status.description == "openai: 503"
    assert dict(after.attributes or {}) == {"error.type": "ModelError"}


def test_fastapi_does_not_trace_requests_a_second_time(
    service: Interlock, views: ReadModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interlock's middleware traces and counts each request; FastAPI's native telemetry,
    on as soon as OpenTelemetry has a provider, would record it again (and asks for the
    providers on every request)."""
    monkeypatch.setattr(trace, "get_tracer_provider", TracerProvider)
    assert FastAPI()._native_telemetry.enabled()  # what a plain app would do here
    app = make_app(service, views, AuthConfig.from_mapping(KEYS))
    assert not app._native_telemetry.enabled()  # type: ignore[attr-defined]


class _ClientGone(Exception):
    """The streamed turn's reader went away as the turn ended."""


def test_a_streamed_turn_ends_its_stream_inside_its_span(service: Interlock) -> None:
    """The closing events (each interrupt, then `turn_end`) are emitted in the turn's
    `invoke_agent` span; an emit that fails on them is the span's error, and the span then
    says no finish reason (the turn did not answer), as when any step of the turn raises."""
    import asyncio

    from interlock.domain.results import StreamEvent

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    service.tracer = OtelTracer(provider.get_tracer("test"))
    current: list[tuple[str, str]] = []

    async def emit(event: StreamEvent) -> None:
        current.append((event.type, getattr(trace.get_current_span(), "name", "")))
        if event.type == "turn_end":
            raise _ClientGone("the reader went away")

    async def turns() -> None:
        chat = service.start_chat("bankingAgent", actor="dana")
        with pytest.raises(_ClientGone):
            await service.send(chat.id, "Transfer $500 to savings.", actor="dana", emit=emit)
        with pytest.raises(_ClientGone):
            await service.open_chat("bankingAgent", "Transfer $500 to savings.",
                                    actor="dana", emit=emit)

    asyncio.run(turns())
    closing = [(kind, name) for kind, name in current if kind in ("interrupt", "turn_end")]
    assert closing == [("interrupt", "invoke_agent bankingAgent"),
                       ("turn_end", "invoke_agent bankingAgent")] * 2
    turned = _named(spans, "invoke_agent")
    assert len(turned) == 2
    for turn in turned:
        assert turn.status.status_code == StatusCode.ERROR
        assert turn.status.description == "_ClientGone: the reader went away"
        assert [e.name for e in turn.events] == ["exception"]
        attrs = dict(turn.attributes or {})
        assert "interlock.finish_reason" not in attrs and "interlock.interrupts" not in attrs
