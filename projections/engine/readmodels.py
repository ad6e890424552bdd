"""The read engine: keeps whatever views the wiring hands it current, and finds each by kind.

It imports no view (eventsourcing's `ProjectionRunner` is the model): the queries over
particular views are `projections.readmodels.SqlReadModels`, built on this.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import Notification, Recording

from interlock.projections.engine.interface import V
from interlock.projections.engine.live import Leader, LiveRunner
from interlock.projections.engine.runner import (
    BatchFailedError,
    BatchRunner,
    Noted,
    Progress,
    ViewStuckError,
    with_calls,
)
from interlock.projections.engine.sql import JointBatchError, PositionConflictError, SqlView
from interlock.projections.engine.stuck import StuckView, StuckViews

if TYPE_CHECKING:
    from interlock.domain.application import Interlock
    from interlock.projections.backends.replicas import Replica, Replicas

FRESH_KEPT = 10_000  # committed events kept for the next pass, at most
POLL = 0.01  # seconds between reads of the views' positions while another process applies them


class ReadEngine:
    """The views handed in, each found by its kind (the `ReadSide` contract), kept current
    when asked (`start`) or caught up in the caller's thread (`catch_up`)."""

    def __init__(
        self,
        app: Interlock,
        views: Sequence[SqlView],
        *,
        on_close: Callable[[], None] | None = None,
        batch_size: int = 1000,
        leader: Leader | None = None,
    ) -> None:
        """`leader`: how processes sharing a store elect the one that applies the views
        (None: this process applies them)."""
        self.app = app
        self._leader = leader
        self.runners = [BatchRunner(app, v.read_model.projection(v), batch_size) for v in views]
        wanted = [r.topics for r in self.runners]
        self._topics = () if not all(wanted) else sorted({t for ts in wanted for t in ts})
        self._on_close = on_close
        self._live: LiveRunner | None = None
        self.stuck_views = StuckViews()
        self._known: dict[str, int] | None = None  # positions the last joint pass committed
        # Events this process committed, by notification id, until a pass applies them:
        # the pass need not decode again what it reads of them (see `committed`).
        self._fresh: dict[int, Any] = {}
        self._fresh_lock = threading.Lock()
        self.applied: dict[str, int] = {}  # each view's position after the last pass
        # Hot standbys whose copies of the views answer queries (the wiring's; docs/ha.md).
        self.replicas: Replicas | None = None
        self._twins: dict[tuple[int, type[SqlView]], SqlView] = {}

    # -- where queries read ------------------------------------------------------------------

    def replica_for(self, name: str, position: int | None) -> Replica | None:
        """A replica whose own copy of view `name` has applied `position` (polled up to the
        replicas' `wait`), or None: read the view here, on the primary. The copy's tracking
        row commits with its rows, so a replica at `position` shows every write up to it."""
        if self.replicas is None:
            return None
        view = self.runner(name).view
        return self.replicas.current(position or 0, lambda r: self.on_replica(
            type(view), r).position())

    def on_replica(self, kind: type[V], replica: Replica) -> V:
        """The view of read model `kind` reading on `replica` (what it fails or refuses
        is read here): the same class over its store's twin (`store.on`)."""
        view = self.view(kind)
        key = (id(replica), type(view))
        twin = self._twins.get(key)
        if twin is None:
            twin = self._twins[key] = type(view)(view.store.on(replica), view.read_model)
        return twin  # type: ignore[return-value]  # the class of view(kind), a V

    def replica_states(self, probe: bool = False) -> list[dict[str, Any]] | None:
        """Each replica's state (None: no replicas), probed now if `probe`."""
        if self.replicas is None:
            return None
        if probe:
            for replica in self.replicas.replicas:
                replica.probe()
        return self.replicas.states()

    def view(self, kind: type[V]) -> V:
        """The view of read model `kind` (a `SqlView` subclass) in this store."""
        found = self.find(kind)
        if found is None:
            raise LookupError(f"no {kind.__name__} among the read models")
        return found

    def find(self, kind: type[V]) -> V | None:
        """The view of read model `kind` in this store, or None if it keeps none."""
        for runner in self.runners:
            if isinstance(runner.view, kind):
                return runner.view
        return None

    def runner(self, name: str) -> BatchRunner:
        """The runner of the view called `name`."""
        for runner in self.runners:
            if runner.name == name:
                return runner
        raise LookupError(f"no read model named {name!r}")

    # -- freshness ---------------------------------------------------------------------------

    def positions(self) -> dict[str, int]:
        if not self.runners:
            return {}
        first, *rest = (r.view.store for r in self.runners)
        return dict(zip([r.name for r in self.runners], first.positions(rest), strict=True))

    def catch_up(self, progress: Progress | None = None, *, head: int | None = None) -> int:
        """Bring every view up to the log's head now, in this thread; the lowest position.

        `head` is the head as the caller was told it (an append's notification): a hint,
        trusted only where this process's own commits hold every id up to it past the
        views' positions (they are in the log). Otherwise (an id another process wrote, a
        notification of another store on the same channel, or nothing new) the log's head
        is read, as without one.

        The views share each read of the log and each decoded event, and commit together
        when they can (one transaction); a view stuck on an event stays where it is
        (retried after its backoff) while the others go on.

        When there is new work, the positions the last pass committed jointly are reused
        instead of read again: a position moved meanwhile (a rebuild) fails the joint
        compare-and-set, and the one-by-one path that follows rereads it. With nothing new
        they are read, so a view reset under an idle log is caught up all the same.
        """
        known, self._known = self._known, None
        if head is None or not known or not self._covered(min(known.values()), head):
            head = self.app.position()
        if not known or head <= min(known.values()):
            known = self.positions()
        positions = known
        active = [r for r in self.runners if self.stuck_views.due(r.name)]
        joint = True
        while active and min(positions[r.name] for r in active) < head:
            active, together = self._shared_step(active, positions, head, progress)
            joint = joint and together
        if joint and len(active) == len(self.runners):
            self._known = positions
        self.applied = dict(positions)
        return min(positions.values())

    def _shared_step(self, active: list[BatchRunner], positions: dict[str, int], head: int,
                     progress: Progress | None) -> tuple[list[BatchRunner], bool]:
        """One read of the log applied to the active views; those still active, and whether
        they committed together (one joint transaction)."""
        start, size = min(positions[r.name] for r in active), self.runners[0].batch_size
        events, upto = self._committed_here(start, head), head
        if events is None:
            notes = self.app.recorder.select_notifications(
                start, size, stop=head, topics=self._topics, inclusive_of_start=False)
            upto = notes[-1].id if len(notes) == size else head
            events = self._decoded(notes, upto)
        if self._joint_step(active, positions, events, upto):
            if progress is not None:
                for runner in active:
                    progress(runner.name, upto, head)
            return active, True
        still = []
        for runner in active:
            try:
                positions[runner.name] = runner.apply(events, positions[runner.name], upto)
            except ViewStuckError as exc:
                self.stuck_views.failed(exc)
                positions[runner.name] = runner.view.position()
                continue
            self.stuck_views.passed(runner.name)
            still.append(runner)
            if progress is not None:
                progress(runner.name, positions[runner.name], head)
        return still, False

    def committed(self, recordings: Sequence[Recording[Any]]) -> None:
        """Keep the events a commit of this process just wrote for the pass that applies
        them. What the pass reads from the log is still the log: a kept event only stands
        in for decoding the record with the same notification id, and only while decoding
        it would give the same event (`reads_as_committed`: not once its chat is erased)."""
        with self._fresh_lock:
            if len(self._fresh) > FRESH_KEPT:  # no pass has run for a while (failing)
                self._fresh.clear()
            for recording in recordings:
                self._fresh[recording.notification.id] = recording.domain_event

    def _covered(self, start: int, head: int) -> bool:
        """Whether this process's commits handed over every id in (start, head]."""
        if not 0 < head - start <= self.runners[0].batch_size:
            return False
        with self._fresh_lock:
            fresh = self._fresh
            return all(nid in fresh for nid in range(start + 1, head + 1))

    def _committed_here(self, start: int, head: int) -> list[Noted] | None:
        """The events in (start, head] when this process's commits handed over every one of
        them (each notification id there kept, each still reading as committed); None: read
        the log. A gap (another process's append, a lost id) or an erased chat reads it."""
        if not 0 < head - start <= self.runners[0].batch_size:
            return None
        ids = range(start + 1, head + 1)
        reads_as = getattr(self.app.mapper, "reads_as_committed", None)
        with self._fresh_lock:
            found = [self._fresh.get(nid) for nid in ids]
            kept = [e for e in found if e is not None and reads_as is not None and reads_as(e)]
            if len(kept) < len(found):
                return None
            for nid in [nid for nid in self._fresh if nid <= head]:
                del self._fresh[nid]
        topics = self._topics
        return with_calls([(nid, e.TOPIC, e) for nid, e in zip(ids, kept, strict=True)
                           if not topics or e.TOPIC in topics])

    def _decoded(self, notes: Sequence[Notification], upto: int) -> list[Noted]:
        """The notes' events: those a commit handed over as they are, the others decoded.

        Kept events the log has now been read past (up to `upto`) are let go: one a view
        stuck on it, or a rebuild, reads again is decoded from the log.
        """
        with self._fresh_lock:
            kept = [self._fresh.pop(n.id, None) for n in notes]
            for nid in [nid for nid in self._fresh if nid <= upto]:
                del self._fresh[nid]
        mapper = self.app.mapper
        reads_as = getattr(mapper, "reads_as_committed", None)
        kept = [e if e is not None and reads_as is not None and reads_as(e) else None
                for e in kept]
        warm = getattr(mapper, "warm", None)  # another process's events: their chats' keys
        if warm is not None:
            warm([n for n, e in zip(notes, kept, strict=True) if e is None])
        return with_calls([(n.id, n.topic, e if e is not None else mapper.to_domain_event(n))
                           for n, e in zip(notes, kept, strict=True)])

    def _joint_step(self, active: list[BatchRunner], positions: dict[str, int],
                    events: list[Noted], upto: int) -> bool:
        """Every active view's batch in one transaction, when the backend can; True if done.

        The common case (every view healthy, nobody racing) costs one commit instead of one
        per view. Anything else (a view failing on an event, a position moved by another
        runner, a store error) rolls it all back and returns False: the views are then
        applied one by one, where failures are isolated and named.
        """
        if len(active) < 2:
            return False
        joint = active[0].view.store.joint([r.view.store for r in active[1:]])
        if joint is None:
            return False
        try:
            with joint:
                for runner in active:
                    start = positions[runner.name]
                    if start < upto:
                        runner.write(runner.wanted(events, start, upto), start, upto)
        except (JointBatchError, BatchFailedError, PositionConflictError):
            return False
        for runner in active:
            positions[runner.name] = max(positions[runner.name], upto)
            self.stuck_views.passed(runner.name)
        return True

    def setup(self) -> None:
        """Create every view's tables that are missing (they may have been dropped)."""
        for runner in self.runners:
            runner.view.setup()

    def stuck(self) -> list[StuckView]:
        """The views stopped on an event they cannot apply (retried with backoff)."""
        return self.stuck_views.report()

    def is_current(self) -> bool:
        return self.lag() == 0

    def lag(self) -> int:
        head = self.app.position()
        return max(0, head - min(self.positions().values()))

    def passes(self) -> int:
        return self._live.passes if self._live is not None else 0

    def stopped(self) -> bool:
        """True while a view is stuck on an event or the runner keeps failing."""
        failing = self._live is not None and self._live.error is not None
        return failing or bool(self.stuck())

    def wait(self, position: int | None, timeout: float = 5.0,
             views: Collection[str] | None = None) -> None:
        """Block until the views named (all by default) have applied `position`."""
        if position is None:
            return
        self.check_not_stuck(position, views)
        if self._live is not None and not self._live.following:
            self._live.wait(position, timeout, views)
            return
        deadline = time.monotonic() + timeout
        while self._lowest(views) < position:
            if time.monotonic() > deadline:
                raise TimeoutError(f"views have not reached position {position} "
                                   "(applied by another process)")
            time.sleep(POLL)  # another process applies the views: poll their positions

    def _lowest(self, views: Collection[str] | None) -> int:
        """The lowest stored position of the views named (all by default)."""
        found = self.positions()
        return min((v for k, v in found.items() if views is None or k in views), default=0)

    def check_not_stuck(self, position: int, views: Collection[str] | None = None) -> None:
        """Raise TimeoutError at once if a stuck view (of those named) cannot reach
        `position`."""
        for runner in self.runners:
            if views is not None and runner.name not in views:
                continue
            error = self.stuck_views.blocking(runner.name, position)
            if error is not None:
                raise TimeoutError(str(error))

    def store_changed(self, up: bool) -> None:
        """The store answers again (or not): a failing runner retries at once."""
        if up and self._live is not None:
            self._live.revive()

    def failing(self) -> bool:
        """True while the runner's passes keep failing (the store, most often)."""
        return self._live is not None and self._live.error is not None

    def start(self, poll_interval: float = 0.5) -> None:
        """Keep the views current from a thread of this process (the embedded default)."""
        self._live = LiveRunner(self, poll_interval, self._leader)
        self._live.start()

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.replicas is not None:
            self.replicas.close()
        if self._on_close is not None:
            self._on_close()
