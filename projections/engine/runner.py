"""Batch catch-up: many notifications per transaction, the last position as tracking."""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection

from interlock.domain.chat.events import ModelResponded, ToolRequested
from interlock.projections.engine.sql import PositionConflictError, SqlView

if TYPE_CHECKING:
    from interlock.domain.application import Interlock

Progress = Callable[[str, int, int], None]  # view name, position, head
Noted = tuple[int, str, Any]  # notification id, topic, decoded event
_REPLY, _REQUESTED = ModelResponded.TOPIC, ToolRequested.TOPIC


def reading(topics: Sequence[str]) -> tuple[str, ...]:
    """The topics to read from the log for a projection of `topics`: replies too, when it
    takes ToolRequested (some chats' replies carry their requests: `with_calls`)."""
    if _REQUESTED in topics and _REPLY not in topics:
        return (*topics, _REPLY)
    return tuple(topics)


def with_calls(events: Sequence[Noted]) -> list[Noted]:
    """The events, each reply that carries tool requests (chats recorded while replies did,
    Dec 2026) followed by the ToolRequested events it stands for (same notification id):
    the views read every chat as one whose requests were recorded one by one."""
    out: list[Noted] = []
    for note in events:
        out.append(note)
        event = note[2]
        if type(event) is ModelResponded and event.requests:
            out.extend((note[0], _REQUESTED, call) for call in event.calls())
    return out


class ViewStuckError(Exception):
    """A view cannot apply one event: it stays at the position just before it."""

    def __init__(self, view: str, notification_id: int, topic: str, cause: BaseException) -> None:
        # The cause's class, never its text: a database error quotes the row it refused,
        # personal data that would outlive the chat's erasure in logs and /readyz.
        super().__init__(f"view {view} cannot apply event {notification_id} ({topic}): "
                         f"{type(cause).__name__}")
        self.view, self.notification_id, self.topic = view, notification_id, topic
        self.cause = cause


class BatchFailedError(Exception):
    """An error raised once a batch began: caused by one of its events."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class BatchRunner:
    """Applies the application's notification log to one view, `batch_size` at a time.

    Each batch is one transaction covering the positions (start, upto]; a runner that
    lost a race to another one is refused (compare-and-set on the position) and rereads.
    A batch that fails otherwise is retried one event per transaction, so the event the
    view cannot apply is named (ViewStuckError) and the events before it are kept.
    """

    def __init__(
        self, app: Interlock, projection: Projection[Any], batch_size: int = 1000
    ) -> None:
        self.app = app
        self.projection = projection
        self.view: SqlView = projection.view
        self.batch_size = batch_size
        self.topics = reading(projection.topics)  # what it reads of the log
        self._takes = frozenset(projection.topics)  # what it applies (empty: every event)
        self._process = _dispatcher(projection)
        self.name: str = self.view.view_name

    def apply(self, events: Sequence[Noted], start: int, upto: int) -> int:
        """Apply already-decoded events in (start, upto] as one batch; the new position.

        Lets several views share one read of the log (SqlReadModels.catch_up). Raises
        ViewStuckError naming the event the view cannot apply.
        """
        if upto <= start:
            return start
        wanted = self.wanted(events, start, upto)
        try:
            self._write(wanted, start, upto)
        except PositionConflictError:
            return self.view.position()  # another runner (or a rebuild) moved it: reread
        except BatchFailedError:
            return self._one_by_one(wanted, start, upto)
        return upto

    def wanted(self, events: Sequence[Noted], start: int, upto: int) -> list[Noted]:
        """The events in (start, upto] that this view's projection takes."""
        topics = self._takes
        return [e for e in events if start < e[0] <= upto and (not topics or e[1] in topics)]

    def write(self, events: Sequence[Noted], start: int, upto: int) -> None:
        """Apply `events` as the batch (start, upto]; raises whatever stops it (no retry)."""
        self._write(events, start, upto)

    def _write(self, events: Sequence[Noted], start: int, upto: int) -> None:
        began = False
        try:
            with self.view.batch(start, upto):
                began = True
                name = self.app.name
                for note_id, _, event in events:
                    self._process(event, _tracking(name, note_id))
        except PositionConflictError:
            raise
        except Exception as exc:  # broad on purpose: any handler error names its event
            if not began:
                raise  # the store itself failed (unreachable, say): no event to blame
            raise BatchFailedError(exc) from exc

    def _one_by_one(self, events: Sequence[Noted], start: int, upto: int) -> int:
        position = start
        # One notification at a time: a reply and the requests it stands for go together.
        for note_id, same in itertools.groupby(events, key=lambda note: note[0]):
            notes = list(same)
            try:
                self._write(notes, position, note_id)
            except PositionConflictError:
                return self.view.position()
            except BatchFailedError as failed:
                raise ViewStuckError(self.name, note_id, notes[0][1],
                                     failed.cause) from failed.cause
            position = note_id
        if position < upto:
            self._write([], position, upto)
        return upto

    def step(self, head: int | None = None, start: int | None = None) -> int:
        """Apply one batch; the new position (unchanged when already current)."""
        if start is None:
            start = self.view.position()
        if head is None:
            head = self.app.position()
        if head <= start:
            return start
        notes = self.app.recorder.select_notifications(
            start, self.batch_size, stop=head, topics=self.topics, inclusive_of_start=False,
        )
        upto = notes[-1].id if len(notes) == self.batch_size else head
        events = [(n.id, n.topic, self.app.mapper.to_domain_event(n)) for n in notes]
        return self.apply(with_calls(events), start, upto)

    def catch_up(self, progress: Progress | None = None, head: int | None = None) -> int:
        """Apply batches until the view has seen the head read at the start; the position."""
        if head is None:
            head = self.app.position()
        position = self.view.position()
        while position < head:
            position = self.step(head, position)
            if progress is not None:
                progress(self.name, position, head)
        return position

    def rebuild(self, progress: Progress | None = None) -> int:
        """Empty the view (one transaction) and replay the whole log into it; the position."""
        self.view.reset()
        return self.catch_up(progress)


@functools.lru_cache(maxsize=4096)
def _tracking(application_name: str, notification_id: int) -> Tracking:
    """The position of a notification, one (immutable) object for every view that applies
    it: a frozen dataclass sets each field through `object.__setattr__`, five times an event."""
    return Tracking(application_name, notification_id)


def _dispatcher(projection: Projection[Any]) -> Callable[[Any, Tracking], None]:
    """`projection.process_event`, with a single-dispatch method's handler looked up by the
    event's class directly: reading the method builds a new bound wrapper every time (about
    a tenth of what a view's pass costs in Python)."""
    method = inspect.getattr_static(type(projection), "process_event", None)
    if not isinstance(method, functools.singledispatchmethod):
        return projection.process_event
    _ = projection.process_event  # registers what eventsourcing deferred, once
    dispatch = method.dispatcher.dispatch

    def process(event: Any, tracking: Tracking) -> None:
        dispatch(type(event))(projection, event, tracking)

    return process
