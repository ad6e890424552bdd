"""The projections: one `process_event` handler per Chat event type, per view.

Handlers only call the view; the runner opens the batch transaction around them and
records the tracking position with the rows.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection

from interlock.domain.events import (
    ChatEvent,
    ChatStarted,
    Interrupted,
    Responded,
    Restarted,
    ToolRequested,
    TurnFinished,
    TurnRetried,
    UserMessageSent,
)
from interlock.projections.views import ChatsView, Decided, DecisionsView, InboxView

_STATUS_AFTER = {"stop": "idle", "max_turns": "idle", "interrupted": "interrupted",
                 "failed": "failed"}


def _replaced(event: Restarted) -> bool:
    return event.replaced_input_sha256 is not None


class InboxProjection(Projection[InboxView]):
    """Pending interrupts across all chats (the approvers' inbox)."""

    name = "inbox"
    topics = tuple(c.TOPIC for c in (ChatStarted, UserMessageSent, ToolRequested, Interrupted,
                                     Responded, Restarted))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Other events do not change the inbox."""

    @process_event.register
    def _started(self, e: ChatStarted, tracking: Tracking) -> None:
        self.view.chat_started(str(e.originator_id), e.tenant, e.agent)

    @process_event.register
    def _message(self, e: UserMessageSent, tracking: Tracking) -> None:
        self.view.message_sent(str(e.originator_id), e.actor)

    @process_event.register
    def _requested(self, e: ToolRequested, tracking: Tracking) -> None:
        self.view.tool_requested(str(e.originator_id), e.ref, e.name, e.input)

    @process_event.register
    def _interrupted(self, e: Interrupted, tracking: Tracking) -> None:
        self.view.interrupted(str(e.originator_id), e.ref, e.metadata, e.timestamp)

    @process_event.register
    def _responded(self, e: Responded, tracking: Tracking) -> None:
        self.view.decided(str(e.originator_id), e.ref)

    @process_event.register
    def _restarted(self, e: Restarted, tracking: Tracking) -> None:
        self.view.decided(str(e.originator_id), e.ref)
        if _replaced(e):
            self.view.input_replaced(str(e.originator_id), e.ref, e.replace_input)


class DecisionsProjection(Projection[DecisionsView]):
    """One row per Responded or Restarted event (the compliance log)."""

    name = "decisions"
    topics = tuple(c.TOPIC for c in (ChatStarted, ToolRequested, Interrupted, Responded,
                                     Restarted))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Other events do not change the decision log."""

    @process_event.register
    def _started(self, e: ChatStarted, tracking: Tracking) -> None:
        self.view.chat_started(str(e.originator_id), e.tenant, e.agent)

    @process_event.register
    def _requested(self, e: ToolRequested, tracking: Tracking) -> None:
        self.view.tool_requested(str(e.originator_id), e.ref, e.name, e.input)

    @process_event.register
    def _interrupted(self, e: Interrupted, tracking: Tracking) -> None:
        self.view.interrupted(str(e.originator_id), e.ref, e.timestamp)

    @process_event.register
    def _responded(self, e: Responded, tracking: Tracking) -> None:
        self.view.decided(Decided(
            chat_id=str(e.originator_id), version=e.originator_version, ref=e.ref,
            kind="respond", actor=e.actor, input_sha256=e.input_sha256, decided_at=e.timestamp,
            output=e.output, resumed_metadata=e.metadata,
        ))

    @process_event.register
    def _restarted(self, e: Restarted, tracking: Tracking) -> None:
        self.view.decided(Decided(
            chat_id=str(e.originator_id), version=e.originator_version, ref=e.ref,
            kind="restart", actor=e.actor, input_sha256=e.input_sha256, decided_at=e.timestamp,
            original_input=e.original_input,
            replaced_input=e.replace_input if _replaced(e) else None,
            resumed_metadata=e.resumed_metadata,
        ))
        if _replaced(e):
            self.view.input_replaced(str(e.originator_id), e.ref, e.replace_input)


class ChatsProjection(Projection[ChatsView]):
    """One summary row per chat: status, agent, last activity, pending interrupts."""

    name = "chats"

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Every event is activity."""
        self._touch(domain_event)

    def _touch(self, e: ChatEvent) -> None:
        self.view.touched(str(e.originator_id), e.originator_version, e.timestamp)

    @process_event.register
    def _started(self, e: ChatStarted, tracking: Tracking) -> None:
        self.view.chat_started(str(e.originator_id), e.tenant, e.agent, e.originator_version,
                               e.timestamp)

    @process_event.register
    def _message(self, e: UserMessageSent, tracking: Tracking) -> None:
        self.view.status_changed(str(e.originator_id), "running", 0)
        self._touch(e)

    @process_event.register
    def _retried(self, e: TurnRetried, tracking: Tracking) -> None:
        self.view.status_changed(str(e.originator_id), "running", 0)
        self._touch(e)

    @process_event.register
    def _interrupted(self, e: Interrupted, tracking: Tracking) -> None:
        self.view.status_changed(str(e.originator_id), None, 1)
        self._touch(e)

    @process_event.register
    def _responded(self, e: Responded, tracking: Tracking) -> None:
        self.view.status_changed(str(e.originator_id), "running", -1)
        self._touch(e)

    @process_event.register
    def _restarted(self, e: Restarted, tracking: Tracking) -> None:
        self.view.status_changed(str(e.originator_id), "running", -1)
        self._touch(e)

    @process_event.register
    def _finished(self, e: TurnFinished, tracking: Tracking) -> None:
        self.view.status_changed(str(e.originator_id), _STATUS_AFTER[e.reason], 0)
        self._touch(e)
