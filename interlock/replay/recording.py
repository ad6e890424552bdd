"""What a recorded chat holds for a replay: its inputs (steps), its model answers keyed by the
request each was sent, and its tool outcomes keyed by tool and input.

The log records each model reply but not the request it answered. The turn loop builds that
request deterministically from the chat's state and its agent (`TurnLoop._request`: the system
prompt, the messages so far, the tools' definitions), so it is rebuilt here from the state just
before each `ModelResponded`, with the agent whose fingerprint the chat recorded (a baseline).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from interlock.domain.chat import approval_events as ae
from interlock.domain.chat import events as ev
from interlock.domain.chat.aggregate import Chat
from interlock.domain.chat.erasure_events import ErasureBegun
from interlock.domain.chat.fork_events import ChatForked, ChatForkedTo
from interlock.domain.chat.messages import Message, text_message
from interlock.domain.chat.state import ChatState
from interlock.domain.runtime.agent import Agent
from interlock.domain.storage.erasure import ERASED

StepKind = Literal["start", "send", "resume", "retry", "withdraw", "escalate", "expire"]
Outcome = tuple[Literal["completed", "failed", "interrupted"], Any]
DECISIONS = (ev.Responded, ev.Restarted, ae.ApprovalVoted)
_KINDS: Mapping[type[ev.ChatEvent], StepKind] = {
    ev.ChatStarted: "start", ev.UserMessageSent: "send", ev.TurnRetried: "retry",
    ev.Responded: "resume", ev.Restarted: "resume", ae.ApprovalVoted: "resume",
    ae.InterruptWithdrawn: "withdraw", ae.ApprovalEscalated: "escalate",
    ae.InterruptExpired: "expire",
}
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
# Facts of the run or of the log, not of the conversation: never compared.
UNCOMPARED = (ev.TurnHeartbeat, ae.AgentFingerprinted, ChatForkedTo, ErasureBegun)


def model_name(agent: Agent) -> str:
    return agent.model if isinstance(agent.model, str) else agent.model.name


def request_body(agent: Agent | None, messages: Iterable[Message]) -> dict[str, Any]:
    """What the turn loop sends the model, as JSON; without an agent, the messages only."""
    wired = [m.wire() for m in messages]
    if agent is None:
        return {"messages": wired}
    system = [text_message("system", agent.system).wire()] if agent.system else []
    return {"model": model_name(agent), "messages": [*system, *wired],
            "tools": [d.model_dump(mode="json") for d in agent.definitions]}


def key_of(value: Any) -> str:
    """A lookup key of a JSON value: its sorted, compact JSON's SHA-256 (never stored, so
    not the canonical form of the log's hashes, which costs five times as much)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def request_key(body: dict[str, Any]) -> str:
    """A request's key; times in tools' responses (an expiry's deadline) are the clock's,
    not the agent's, so they are left out."""
    messages = [_timeless(m) if m.get("role") == "tool" else m for m in body["messages"]]
    return key_of({**body, "messages": messages})


def _timeless(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    if isinstance(value, str) and _ISO.fullmatch(value):
        return "(a time)"
    return value


def tool_key(name: str, input: Any, resumed: Any) -> str:
    """A tool run is told apart by its tool, its input and a restart's metadata."""
    return key_of({"name": name, "input": input, "resumed": resumed})


@dataclass
class Step:
    """One input of the recorded chat (a message, a resume...) and the events it recorded."""

    kind: StepKind
    inputs: list[ev.ChatEvent]
    events: list[ev.ChatEvent] = field(default_factory=list)  # inputs included
    seen: dict[str, Any] = field(default_factory=dict)  # ref -> the input a decision was on

    @property
    def version(self) -> int:
        return self.inputs[0].originator_version


@dataclass(frozen=True)
class ModelCall:
    """One recorded model call: the request rebuilt, its key, the reply recorded."""

    version: int
    key: str
    request: dict[str, Any]
    reply: Message | str  # text: the call failed so (a TurnFinished `failed`)
    known_agent: bool


@dataclass
class ChatRecording:
    chat_id: Any
    agent: str
    tenant: str
    steps: list[Step]
    calls: list[ModelCall]
    tools: dict[str, list[Outcome]]
    fingerprints: list[str]
    unknown_agent: bool  # a model call's agent was not among the baselines

    @property
    def forked(self) -> bool:
        """A fork begins with its source's history, not with inputs a replay could give."""
        return any(isinstance(e, ChatForked) for e in self.steps[0].events)

    @property
    def erased(self) -> bool:
        """Its personal data was erased (its messages read as placeholders), or its erasure
        began (`ErasureBegun`, the key perhaps still there): never replayed, so never sent
        to a live model."""
        return any(isinstance(e, ErasureBegun) for s in self.steps for e in s.events) or any(
            isinstance(e, ev.UserMessageSent) and e.text == ERASED
            for s in self.steps for e in s.inputs)

    def answers(self) -> dict[str, deque[Message | str]]:
        """The recorded replies (a failure's text) by request key, in the order given."""
        found: dict[str, deque[Message | str]] = {}
        for call in self.calls:
            found.setdefault(call.key, deque()).append(call.reply)
        return found

    def outcomes(self) -> dict[str, deque[Outcome]]:
        return {key: deque(runs) for key, runs in self.tools.items()}


class _Reader:
    """Reads a chat's events once, building its recording as the state unfolds."""

    def __init__(self, baselines: Mapping[str, Agent]) -> None:
        self.baselines = baselines
        self.chat: Chat | None = None
        self.steps: list[Step] = []
        self.calls: list[ModelCall] = []
        self.tools: dict[str, list[Outcome]] = {}
        self.unknown = False

    def read(self, event: ev.ChatEvent) -> None:
        if self.chat is not None:
            self._observe(self.chat.state, event)
        self._step(event)
        self.chat = event.mutate(self.chat)

    def _step(self, event: ev.ChatEvent) -> None:
        kind = _KINDS.get(type(event))
        last = self.steps[-1] if self.steps else None
        if kind is not None and not (last is not None and _joins(last, kind, event)):
            last = Step(kind, [])
            self.steps.append(last)
        if last is None:
            return
        if kind is not None:
            last.inputs.append(event)
        if isinstance(event, DECISIONS) and self.chat is not None:
            last.seen[event.ref] = self.chat.state.calls[event.ref].input
        last.events.append(event)

    def _observe(self, state: ChatState, event: ev.ChatEvent) -> None:
        if isinstance(event, ev.ModelResponded):
            self._model_call(state, event, event.message)
        elif isinstance(event, ev.TurnFinished) and event.reason == "failed" and (
                self.chat is not None and self.chat.needs_model()):
            self._model_call(state, event, event.error or "")  # the model call failed
        elif isinstance(event, ev.ToolCompleted | ev.ToolFailed | ev.Interrupted):
            call = state.calls[event.ref]
            key = tool_key(call.name, call.input, call.resumed)
            self.tools.setdefault(key, []).append(_outcome(event))

    def _model_call(self, state: ChatState, event: ev.ChatEvent, reply: Message | str) -> None:
        agent = self.baselines.get(state.fingerprint or "")
        self.unknown |= agent is None
        body = request_body(agent, state.messages)
        self.calls.append(ModelCall(event.originator_version, request_key(body), body, reply,
                                    agent is not None))


def _joins(step: Step, kind: StepKind, event: ev.ChatEvent) -> bool:
    """Decisions (or withdrawals) in a row by one actor, with nothing recorded between them,
    were one resume (one withdrawal), or replay alike as one."""
    if kind != step.kind or kind not in ("resume", "withdraw") or step.events != step.inputs:
        return False
    first = step.inputs[0]
    return all(getattr(first, name, None) == getattr(event, name, None)
               for name in ("actor", "reason", "request_key", "resume_metadata"))


def _outcome(event: ev.ChatEvent) -> Outcome:
    if isinstance(event, ev.ToolCompleted):
        return "completed", event.output
    if isinstance(event, ev.ToolFailed):
        return "failed", event.error
    assert isinstance(event, ev.Interrupted)
    return "interrupted", event.metadata


def read_recording(events: Iterable[ev.ChatEvent], baselines: Mapping[str, Agent]
                   ) -> ChatRecording | None:
    """The recording of one chat's events (oldest first); None for an empty log."""
    reader = _Reader(baselines)
    for event in events:
        reader.read(event)
    chat = reader.chat
    if chat is None:
        return None
    prints = [e.fingerprint for s in reader.steps for e in s.events
              if isinstance(e, ae.AgentFingerprinted | ev.UserMessageSent)
              and e.fingerprint is not None]
    return ChatRecording(chat.id, chat.state.agent, chat.state.tenant, reader.steps,
                         reader.calls, reader.tools, prints, reader.unknown)
