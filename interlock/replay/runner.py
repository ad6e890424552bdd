"""Replaying recorded chats on a new agent version, in a scratch in-memory service.

Each recorded input (a message, a resume, a retry, a withdrawal, an expiry) is given to the
scratch service as the same command; after each, the events it recorded are compared with
those the recording holds for that step. The first difference ends the chat's replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from eventsourcing.persistence import Recording
from pydantic import BaseModel

from interlock.domain.application import IN_MEMORY, Interlock
from interlock.domain.chat import events as ev
from interlock.domain.errors import ConfigurationError
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.models import Model
from interlock.replay.differences import Difference
from interlock.replay.driver import Driver
from interlock.replay.recording import ChatRecording, read_recording
from interlock.replay.standins import SESSION, Session, stand_in

Status = Literal["identical", "different", "allowed", "skipped"]
SKIPPED_FORK = "a fork: it began with its source's history, which its source's replay tests"
SKIPPED_ERASED = "its personal data was erased: there is nothing left to replay"
RECYCLE_EVERY = 200  # chats per scratch service: its memory store is dropped after them


class ChatResult(BaseModel):
    """One chat's verdict: identical, or its first difference."""

    chat_id: str
    agent: str
    status: Status
    difference: Difference | None = None
    notes: list[str] = []
    model_calls: int = 0
    tool_runs: int = 0  # answered from the recording; no tool ever runs


@dataclass(frozen=True)
class ReplayOptions:
    """The new agents; `baselines`, the agents the recording was made with (matched by
    fingerprint) to rebuild the requests recorded; `live_model` calls the new agents' own
    models (`resolve_model` builds those named by a provider string)."""

    agents: Sequence[Agent]
    baselines: Sequence[Agent] = ()
    live_model: bool = False
    resolve_model: Callable[[str], Model] | None = None


class Replayer:
    """Replays chats one after the other on scratch services of stand-in agents."""

    def __init__(self, options: ReplayOptions) -> None:
        self.options = options
        self.agents = {a.name: a for a in options.agents}
        self.baselines = {a.fingerprint: a for a in (*options.baselines, *options.agents)}
        self.live = {a.name: _live(a, options) for a in options.agents} if (
            options.live_model) else {}
        self._scratch: Interlock | None = None
        self._served = 0
        self.committed: list[ev.ChatEvent] = []

    def _committed(self, recordings: list[Recording[UUID]]) -> None:
        """What the scratch service commits, as committed (not read back and decoded)."""
        self.committed.extend(r.domain_event for r in recordings)  # type: ignore[misc]

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.close()
            self._scratch = None

    def recording(self, events: Iterable[ev.ChatEvent]) -> ChatRecording | None:
        return read_recording(events, self.baselines)

    async def replay(self, recording: ChatRecording) -> ChatResult:
        agent = self.agents.get(recording.agent)
        if recording.forked or recording.erased:
            return ChatResult(chat_id=str(recording.chat_id), agent=recording.agent,
                              status="skipped",
                              notes=[SKIPPED_FORK if recording.forked else SKIPPED_ERASED])
        if agent is None:
            return _verdict(recording, Difference(
                kind="not_replayable", version=1, event="ChatStarted",
                expected=recording.agent, actual=sorted(self.agents),
                detail=f"no new agent is named {recording.agent}"), None)
        session = Session(recording, self.live.get(agent.name))
        token = SESSION.set(session)
        service, self.committed = self._service(), []
        try:
            found = await Driver(service, recording, session, self.committed).run()
        finally:
            SESSION.reset(token)
        return _verdict(recording, found, session, agent)

    def _service(self) -> Interlock:
        if self._scratch is None or self._served >= RECYCLE_EVERY:
            self.close()
            self._scratch = Interlock([stand_in(a) for a in self.agents.values()],
                                      env=IN_MEMORY, io_threads=1)
            self._scratch.commit_listeners.append(self._committed)
            self._served = 0
        self._served += 1
        return self._scratch


def _live(agent: Agent, options: ReplayOptions) -> Model:
    if not isinstance(agent.model, str):
        return agent.model
    if options.resolve_model is None:
        raise ConfigurationError(f"agent {agent.name} names model {agent.model!r}: "
                                 "--live-model needs the providers package")
    return options.resolve_model(agent.model)


def _verdict(recording: ChatRecording, found: Difference | None, session: Session | None,
             agent: Agent | None = None) -> ChatResult:
    notes = []
    if recording.unknown_agent:
        notes.append("the recorded agent's definition is not among the baselines (pass "
                     "--baseline): its requests were compared by their messages only")
    if agent is not None and recording.fingerprints and (
            recording.fingerprints[-1] != agent.fingerprint):
        notes.append(f"agent fingerprint {recording.fingerprints[-1][:12]} -> "
                     f"{agent.fingerprint[:12]}")
    return ChatResult(chat_id=str(recording.chat_id), agent=recording.agent,
                      status="identical" if found is None else "different",
                      difference=found, notes=notes,
                      model_calls=session.model_calls if session else 0,
                      tool_runs=session.tool_runs if session else 0)
