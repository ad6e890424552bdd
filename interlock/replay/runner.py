"""Replaying recorded chats on a new agent version, in a scratch in-memory service.

Each recorded input (a message, a resume, a retry, a withdrawal, an expiry) is given to the
scratch service as the same command; after each, the events it recorded are compared with
those the recording holds for that step. The first difference ends the chat's replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal
from uuid import UUID

from eventsourcing.persistence import Recording
from pydantic import BaseModel

from interlock.domain.application import IN_MEMORY, Interlock
from interlock.domain.chat import approval_events as ae
from interlock.domain.chat import events as ev
from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.policies import Decider
from interlock.domain.chat.rules import (
    ApproveEntry,
    EditEntry,
    RejectEntry,
    RespondEntry,
    RestartEntry,
    VoteEntry,
)
from interlock.domain.errors import ConfigurationError, InterlockError
from interlock.domain.runtime.agent import Agent
from interlock.domain.runtime.models import Model
from interlock.replay.compare import first_difference
from interlock.replay.differences import Difference
from interlock.replay.recording import ChatRecording, Step, read_recording
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
            found = await _Driver(service, recording, session, self.committed).run()
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


class _Driver:
    """Gives one recorded chat's inputs to the scratch service, comparing as it goes."""

    def __init__(self, service: Interlock, recording: ChatRecording, session: Session,
                 committed: list[ev.ChatEvent]) -> None:
        self.service, self.recording, self.session = service, recording, session
        self.committed = committed  # the scratch chat's events, as they are committed
        self.chat_id: UUID = recording.chat_id

    async def run(self) -> Difference | None:
        version = 0
        for step in self.recording.steps:
            found = await self._step(step)
            if found is None and self.session.found is not None:
                found = self.session.found
            if found is not None:
                return found if found.version else found.model_copy(
                    update={"version": step.version})
            events = self.committed[version:]
            found = first_difference(step.events, events, masked=True)
            if found is not None:
                return found
            version += len(events)
        recorded = [e for step in self.recording.steps for e in step.events]
        return first_difference(recorded, self.committed, masked=False)

    async def _step(self, step: Step) -> Difference | None:
        try:
            return await self._command(step)
        except InterlockError as exc:
            kind = "approval_no_longer_applies" if step.kind in ("resume", "withdraw") else (
                "outcome_changed")
            return Difference(kind=kind, version=step.version, event=type(step.inputs[0]).__name__,
                              expected=step.kind, actual=exc.code,
                              detail=f"the recorded {step.kind} was refused: {exc}")

    async def _command(self, step: Step) -> Difference | None:
        first = step.inputs[0]
        if isinstance(first, ev.ChatStarted):
            self.service.start_chat(first.agent, actor=first.actor, tenant=first.tenant,
                                    metadata=first.metadata, chat_id=self.chat_id)
        elif isinstance(first, ev.UserMessageSent):
            await self.service.send(self.chat_id, first.text, actor=first.actor)
        elif isinstance(first, ev.TurnRetried):
            await self.service.retry(self.chat_id, actor=first.actor, stale_after=timedelta(0))
        elif isinstance(first, ae.InterruptWithdrawn):
            return await self._withdraw(step, first)
        elif isinstance(first, ae.ApprovalEscalated | ae.InterruptExpired):
            await self._expire(first)
        else:
            return await self._resume(step)
        return None

    def _no_longer_applies(self, step: Step) -> Difference | None:
        """The first recorded decision whose call is not pending on the same input now."""
        calls = self.service.get_chat(self.chat_id).state.calls
        for event in step.inputs:
            ref, seen_sha = getattr(event, "ref"), getattr(event, "input_sha256")  # noqa: B009
            call = calls.get(ref)
            expected = {"ref": ref, "input": step.seen.get(ref), "input_sha256": seen_sha}
            if call is None or call.status != "interrupted":
                return Difference(
                    kind="approval_no_longer_applies", version=event.originator_version,
                    event=type(event).__name__, expected=expected,
                    actual=None if call is None else {"ref": ref, "status": call.status},
                    detail=f"{ref} is not pending in the new version")
            if (now := sha256_hex(call.input)) != seen_sha:
                return Difference(
                    kind="approval_no_longer_applies", version=event.originator_version,
                    event=type(event).__name__, expected=expected,
                    actual={"ref": ref, "input": call.input, "input_sha256": now},
                    detail=f"the decision on {ref} was made on another input")
        return None

    async def _resume(self, step: Step) -> Difference | None:
        if (found := self._no_longer_applies(step)) is not None:
            return found
        respond, restart, votes = _entries(step.inputs)
        first: Any = step.inputs[0]
        await self.service.resume(
            self.chat_id, respond=respond, restart=restart, votes=votes, actor=first.actor,
            metadata=first.resume_metadata, idempotency_key=first.request_key,
            decider=Decider.trusted(first.actor))
        return None

    async def _withdraw(self, step: Step, first: ae.InterruptWithdrawn) -> Difference | None:
        if (found := self._no_longer_applies(step)) is not None:
            return found
        await self.service.withdraw(self.chat_id, [getattr(e, "ref") for e in step.inputs],  # noqa: B009
                                    reason=first.reason, decider=Decider.trusted(first.actor))
        return None

    async def _expire(self, event: ae.ApprovalEscalated | ae.InterruptExpired) -> None:
        """Due now in the scratch chat: its deadlines were set when the replay held it."""
        call = self.service.get_chat(self.chat_id).state.calls.get(event.ref)
        terms = call.approval.terms if call is not None and call.approval else None
        due = None if terms is None else (
            terms.expires_at if isinstance(event, ae.InterruptExpired) else terms.escalate_at)
        if due is not None:
            await self.service.expire_due(self.chat_id, event.ref, at=due)


def _entries(inputs: Sequence[ev.ChatEvent]
             ) -> tuple[list[RespondEntry], list[RestartEntry], list[VoteEntry]]:
    respond, restart, votes = [], [], []
    for e in inputs:
        if isinstance(e, ev.Responded):
            respond.append(RespondEntry(ref=e.ref, name=e.name, output=e.output,
                                        metadata=e.metadata, input_sha256=e.input_sha256))
        elif isinstance(e, ev.Restarted):
            replaced = {"replace_input": e.replace_input} if (
                e.replaced_input_sha256 is not None) else {}  # "no replacement" is unset
            restart.append(RestartEntry(ref=e.ref, name=e.name, input_sha256=e.input_sha256,
                                        resumed_metadata=e.resumed_metadata, **replaced))
        elif isinstance(e, ae.ApprovalVoted):
            votes.append(_vote(e))
    return respond, restart, votes


def _vote(e: ae.ApprovalVoted) -> VoteEntry:
    if e.vote == "edit":
        return EditEntry(ref=e.ref, name=e.name, input=e.edited_input,
                         input_sha256=e.input_sha256)
    if e.vote == "reject":
        return RejectEntry(ref=e.ref, name=e.name, reason=e.reason or "-",
                           input_sha256=e.input_sha256)
    return ApproveEntry(ref=e.ref, name=e.name, input_sha256=e.input_sha256)

