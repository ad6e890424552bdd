"""Batch catch-up: many notifications per transaction, the last position as tracking."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, Tracking
from eventsourcing.projection import Projection

from interlock.projections.sql import SqlView

Progress = Callable[[str, int, int], None]  # view name, position, head
Noted = tuple[int, str, Any]  # notification id, topic, decoded event


class BatchRunner:
    """Applies the application's notification log to one view, `batch_size` at a time.

    Each batch is one transaction covering the positions (start, upto]; a runner that
    lost a race to another one is refused (compare-and-set on the position) and rereads.
    """

    def __init__(
        self, app: Application[Any], projection: Projection[Any], batch_size: int = 1000
    ) -> None:
        self.app = app
        self.projection = projection
        self.view: SqlView = projection.view
        self.batch_size = batch_size

    @property
    def name(self) -> str:
        return self.view.view_name

    def apply(self, events: Sequence[Noted], start: int, upto: int) -> int:
        """Apply already-decoded events in (start, upto] as one batch; the new position.

        Lets several views share one read of the log (SqlReadModels.catch_up).
        """
        if upto <= start:
            return start
        topics = set(self.projection.topics)  # empty: every event
        try:
            with self.view.batch(start, upto):
                for note_id, topic, event in events:
                    if start < note_id <= upto and (not topics or topic in topics):
                        self.projection.process_event(event, Tracking(self.app.name, note_id))
        except IntegrityError:
            return self.view.position()  # another runner got there first: carry on from it
        return upto

    def step(self, head: int | None = None, start: int | None = None) -> int:
        """Apply one batch; the new position (unchanged when already current)."""
        if start is None:
            start = self.view.position()
        if head is None:
            head = self.app.recorder.max_notification_id() or 0
        if head <= start:
            return start
        notes = self.app.recorder.select_notifications(
            start, self.batch_size, stop=head, topics=self.projection.topics,
            inclusive_of_start=False,
        )
        upto = notes[-1].id if len(notes) == self.batch_size else head
        with self.view.batch(start, upto):
            for note in notes:
                event = self.app.mapper.to_domain_event(note)
                self.projection.process_event(event, Tracking(self.app.name, note.id))
        return upto

    def catch_up(self, progress: Progress | None = None, head: int | None = None) -> int:
        """Apply batches until the view has seen the head read at the start; the position."""
        if head is None:
            head = self.app.recorder.max_notification_id() or 0
        position = self.view.position()
        while position < head:
            position = self._step_or_reread(position, head)
            if progress is not None:
                progress(self.name, position, head)
        return position

    def rebuild(self, progress: Progress | None = None) -> int:
        """Drop the view, create it empty and replay the whole log into it; the position."""
        self.view.drop()
        self.view.setup()
        return self.catch_up(progress)

    def _step_or_reread(self, position: int, head: int) -> int:
        try:
            return self.step(head, position)
        except IntegrityError:
            # Another runner applied these events first: carry on from where it got to.
            now = self.view.position()
            if now == position:
                raise
            return now
