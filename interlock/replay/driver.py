"""Driving one recorded chat through the scratch service: each recorded input as the same
command, the events it records compared with the recorded ones after each."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

from interlock.domain.application import Interlock
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
from interlock.domain.errors import InterlockError
from interlock.replay.compare import UNSAID, first_difference
from interlock.replay.differences import Difference
from interlock.replay.recording import ChatRecording, Step
from interlock.replay.standins import Session


class Driver:
    """Gives one recorded chat's inputs to the scratch service, comparing as it goes."""

    def __init__(self, service: Interlock, recording: ChatRecording, session: Session,
                 committed: list[ev.ChatEvent]) -> None:
        self.service, self.recording, self.session = service, recording, session
        self.committed = committed  # the scratch chat's events, as they are committed
        self.chat_id: UUID = recording.chat_id

    async def run(self) -> Difference | None:
        version = 0
        for step in self.recording.steps:
            found = await self._step(step) or self._found(step)
            events = self.committed[version:]
            seen = first_difference(step.events, events, masked=True)
            if seen is not None and (found is None or seen.kind == "policy_changed"):
                return seen  # a policy difference explains what a stand-in met after it
            if found is not None:
                return found
            version += len(events)
        recorded = [e for step in self.recording.steps for e in step.events]
        return first_difference(recorded, self.committed, masked=False)

    def _found(self, step: Step) -> Difference | None:
        """What a stand-in met during the step, placed at the step if it named no version."""
        found = self.session.found
        if found is None or found.version:
            return found
        return found.model_copy(update={"version": step.version})

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
        terms = call.approval.current() if call is not None and call.approval else None
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
                                        metadata=e.metadata, input_sha256=e.input_sha256,
                                        as_part=e.as_part))
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
                         input_sha256=e.input_sha256, reason=e.reason or UNSAID)
    if e.vote == "reject":
        return RejectEntry(ref=e.ref, name=e.name, reason=e.reason or UNSAID,
                           input_sha256=e.input_sha256)
    return ApproveEntry(ref=e.ref, name=e.name, input_sha256=e.input_sha256)

