"""The stand-ins a replay runs the new agent with: a model answering from the recording,
tools returning their recorded outcomes. Which chat they answer for is the context's
(`SESSION`), so one scratch service replays many chats, one after the other."""

from __future__ import annotations

from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from interlock.domain.chat.events import ToolRequested, requested_calls
from interlock.domain.chat.messages import Message
from interlock.domain.errors import ModelError
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.middleware import ToolInputError, ToolInvocation, ToolNext
from interlock.domain.runtime.models import ChunkSink, Model, ModelRequest, ModelResponse
from interlock.domain.runtime.tools import SchemaError
from interlock.replay.differences import Difference, readable_diff
from interlock.replay.recording import ChatRecording, Outcome, request_key, tool_key


class ReplayStopped(ModelError):
    """Raised by a stand-in once it found the chat's first difference: the turn stops."""


@dataclass
class Session:
    """One chat's replay: what is left of its recording, and its first difference."""

    recording: ChatRecording
    live: Model | None = None  # --live-model: the new agent's own model answers
    answers: dict[str, deque[Message | str]] = field(default_factory=dict)
    outcomes: dict[str, deque[Outcome]] = field(default_factory=dict)
    model_calls: int = 0
    tool_runs: int = 0
    found: Difference | None = None

    def __post_init__(self) -> None:
        self.answers = self.recording.answers()
        self.outcomes = self.recording.outcomes()

    def stop(self, difference: Difference) -> None:
        if self.found is None:
            self.found = difference
        raise ReplayStopped(f"replay stopped: {difference.kind}")


SESSION: ContextVar[Session] = ContextVar("interlock_replay_session")


class RecordedModel:
    """Answers each request with the reply recorded for the same request."""

    def __init__(self, agent: Agent, name: str) -> None:
        self.agent, self.name = agent, name

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None
                       ) -> ModelResponse:
        session = SESSION.get()
        index, session.model_calls = session.model_calls, session.model_calls + 1
        reply = self._recorded(session, request)
        if session.live is not None:
            answer = await session.live.generate(request, on_chunk)
            if reply is None:
                self._drift(session, index, request, answer.message)
            return answer
        if reply is None:
            self._drift(session, index, request, None)
        if isinstance(reply, str):
            raise ModelError(reply)  # it failed so when it was recorded
        assert reply is not None
        return ModelResponse(message=reply)

    def _recorded(self, session: Session, request: ModelRequest) -> Message | str | None:
        for body in _bodies(request, self.name, session.recording.unknown_agent):
            replies = session.answers.get(request_key(body))
            if replies:
                return replies.popleft() if len(replies) > 1 else replies[0]
        return None

    def _drift(self, session: Session, index: int, request: ModelRequest,
               live: Message | None) -> None:
        calls = session.recording.calls
        recorded = calls[index] if index < len(calls) else None
        expected = recorded.request if recorded else None
        full, partial = _bodies(request, self.name, True)
        actual = full if recorded is None or recorded.known_agent else partial
        session.stop(Difference(
            kind="prompt_drift", version=recorded.version if recorded else 0,
            event="ModelResponded",
            expected=_summary(expected), actual=_summary(actual),
            detail=f"model call {index + 1}" + ("" if recorded else " was never recorded")
            + ("" if live is None else f"; the live model answered {live.wire()}"),
            diff=readable_diff(expected, actual)))


def _bodies(request: ModelRequest, model: str, partial: bool) -> list[dict[str, Any]]:
    """The request as the recording keys it; with `partial`, also its messages alone (a
    recorded call whose agent was not among the baselines is keyed so)."""
    full = {"model": model, "messages": [m.wire() for m in request.messages],
            "tools": [t.model_dump(mode="json") for t in request.tools]}
    if not partial:
        return [full]
    return [full, {"messages": [m.wire() for m in request.messages if m.role != "system"]}]


def _summary(body: dict[str, Any] | None) -> Any:
    """A request as the report shows it: the last message and the sizes of the rest."""
    if body is None:
        return None
    messages = body.get("messages", [])
    shown = {k: v for k, v in body.items() if k not in ("messages", "tools")}
    shown["messages"] = len(messages)
    shown["last_message"] = messages[-1] if messages else None
    shown["tools"] = [t["name"] for t in body.get("tools", [])]
    return shown


async def recorded_tool(call: ToolInvocation, next: ToolNext) -> Any:
    """The innermost middleware: the recorded outcome of this tool and input; never `next`."""
    session = SESSION.get()
    try:
        call.tool.validate_input(call.input)
    except SchemaError as exc:
        raise ToolInputError(exc.errors) from None  # as the tool's own input check would
    resumed = None if call.ctx.resumed is None else dict(call.ctx.resumed)
    runs = session.outcomes.get(tool_key(call.name, call.input, resumed))
    if not runs:
        session.stop(Difference(
            kind="tool_call_changed", event="ToolRequested",
            version=_requested_at(session.recording, call.ctx.ref),
            expected=_recorded_inputs(session.recording, call.name),
            actual={"ref": call.ctx.ref, "name": call.name, "input": call.input,
                    "resumed": resumed},
            detail=f"{call.name} would run with an input never recorded"))
    assert runs is not None
    session.tool_runs += 1
    kind, value = runs.popleft() if len(runs) > 1 else runs[0]
    if kind == "interrupted":
        call.ctx.interrupt(value)
    if kind == "failed":
        raise _failure(value)
    return value


def _requested_at(recording: ChatRecording, ref: str) -> int:
    """The version of the recorded request of this ref (0: none; the step's is reported)."""
    return next((e.originator_version for s in recording.steps
                 for e in requested_calls(s.events) if isinstance(e, ToolRequested)
                 and e.ref == ref), 0)


def _recorded_inputs(recording: ChatRecording, name: str) -> list[Any]:
    """The inputs this tool was recorded running with in the chat (what was expected)."""
    return [e.input for s in recording.steps for e in requested_calls(s.events)
            if isinstance(e, ToolRequested) and e.name == name]


def _failure(error: str) -> Exception:
    """An exception the turn loop records as `error` ("Type: message")."""
    name, sep, message = error.partition(": ")
    if not sep or not name.isidentifier():
        return RecordedFailure(error)
    named: type[Exception] = type(name, (Exception,), {})
    return named(message)


class RecordedFailure(Exception):
    """A recorded failure whose text names no exception type."""


def stand_in(agent: Agent) -> Agent:
    """The agent as a replay runs it: same prompt, tools, policies and middleware, but the
    recorded model and the recorded tool outcomes (innermost)."""
    return replace(agent, model=RecordedModel(agent, _name(agent)),
                   tool_middleware=(*agent.tool_middleware, recorded_tool))


def _name(agent: Agent) -> str:
    return agent.model if isinstance(agent.model, str) else agent.model.name
