"""What every read model shares: the tracked SQL view base and the registration record.

A read model is one module: a `SqlView` subclass (its tables, SQL and queries) and a
`Projection` of it (one `process_event` handler per event type), named by a `ReadModel`
and listed once in `registry.READ_MODELS`. A backend's `ViewStore` (`sqlite.py`,
`postgres.py`) supplies the connection, tracking and transactions of each view.

SQL is written once as templates: `{name}` is a table or index of the view (the backend
quotes and qualifies it), `{json}` and `{ts}` are column types, `%(x)s` are parameters.
Each view is written in batches: `batch(start, upto)` opens one transaction that refuses
to run unless the view's tracking position is still `start` (compare-and-set), and
records `upto` as the new position with the rows, so every event is applied exactly once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

from eventsourcing.persistence import IntegrityError, Tracking, TrackingRecorder
from eventsourcing.projection import Projection

Key = tuple[Any, ...]
Row = Mapping[str, Any]
Dialect = Literal["sqlite", "postgresql"]
# The tracking table's row that records the version of the view's shape (absent: 1).
VERSION_KEY = "interlock:view-version"


class PositionConflictError(IntegrityError):
    """Another runner moved the view's tracking position: this batch is refused."""

    def __init__(self, view: str, expected: int, found: int | None) -> None:
        super().__init__(f"view {view}: expected position {expected}, found {found}")
        self.view, self.expected, self.found = view, expected, found


@dataclass(frozen=True)
class ReadModel:
    """One read model: its view class and the projection that writes it."""

    view: type[SqlView]
    projection: type[Projection[Any]]

    @property
    def name(self) -> str:
        """The view's name: its tables' and tracking's prefix, the CLI's argument."""
        return self.view.view_name

    def open(self, store: ViewStore) -> SqlView:
        """The view over `store`, its tables created if missing."""
        view = self.view(store, self)
        view.setup()
        return view


class ViewStore(TrackingRecorder, ABC):
    """Where one view lives: a backend's connection, tracking table and transactions."""

    dialect: ClassVar[Dialect]
    view_name: str
    ddl: tuple[str, ...]
    version: int = 1  # the view's (SqlView.version): another recorded empties it at setup

    @abstractmethod
    def position(self) -> int:
        """The notification id up to which events have been applied (0 when empty)."""

    @abstractmethod
    def batch(self, start: int, upto: int) -> AbstractContextManager[None]:
        """One transaction moving the position from `start` to `upto`; conflicts if moved."""

    @abstractmethod
    def setup(self) -> None:
        """Create the tracking table and the view's tables if missing."""

    @abstractmethod
    def drop(self) -> None:
        """Remove the view's tables and tracking."""

    @abstractmethod
    def reset(self) -> None:
        """Drop and recreate the view empty in one transaction: readers never miss a table."""

    @abstractmethod
    def run(self, template: str, params: Mapping[str, Any]) -> None:
        """Execute a write inside the current batch."""

    @abstractmethod
    def run_many(self, template: str, params: Sequence[Mapping[str, Any]]) -> None:
        """Execute one write per parameter set inside the current batch."""

    @abstractmethod
    def fetch(self, template: str, params: Mapping[str, Any]) -> list[Row]:
        """Rows of a query, outside any batch."""

    @abstractmethod
    def encode_json(self, value: Any) -> Any:
        """A value as the backend stores JSON."""

    @abstractmethod
    def encode_ts(self, value: datetime) -> Any:
        """A time as the backend stores timestamps."""

    def on(self, replica: Any) -> ViewStore:
        """This store reading on a hot standby `replica` (PostgreSQL's; docs/ha.md)."""
        raise LookupError(f"a {self.dialect} view has no replicas")

    def positions(self, others: Sequence[ViewStore]) -> list[int]:
        """This store's position and `others'`, in that order (a backend may read them in
        one statement: an idle views' pass reads them all)."""
        return [store.position() for store in (self, *others)]

    def joint(self, others: Sequence[ViewStore]) -> AbstractContextManager[None] | None:
        """One transaction in which this store's and `others`' batches all commit, or None.

        Inside it, each `batch()` writes and moves its position in the shared transaction;
        a position that moved under any of them (or any failure) rolls all of them back
        (JointBatchError), and the caller applies each view on its own instead.
        """
        return None

    @abstractmethod
    def load_json(self, value: Any) -> Any: ...

    @abstractmethod
    def load_ts(self, value: Any) -> datetime: ...


class JointBatchError(Exception):
    """A joint batch of several views was rolled back: nothing of it was written."""


class SqlView(TrackingRecorder):
    """A tracked read model whose SQL is written once and run by its store's backend."""

    view_name: ClassVar[str]
    _start = _upto = 0  # the batch being written: (start, upto]
    tables: ClassVar[tuple[str, ...]]  # short names; the backend prefixes them
    ddl: ClassVar[tuple[str, ...]]
    dump_sql: ClassVar[str]
    # The shape of the view's rows: bump it when a column is added or a row means more,
    # and a store holding another version is emptied when opened and catches up from
    # the log (its CREATE TABLE IF NOT EXISTS would keep the old shape). The store
    # records it in the view's tracking table (VERSION_KEY); none recorded: 1.
    version: ClassVar[int] = 1

    def __init__(self, store: ViewStore, read_model: ReadModel) -> None:
        self.store = store
        self.read_model = read_model
        self.dialect = store.dialect
        # Bound once: every write of the hot path skips a delegating call.
        self._run, self._run_many, self._fetch = store.run, store.run_many, store.fetch
        self._json, self._ts = store.encode_json, store.encode_ts
        self._load_json, self._load_ts = store.load_json, store.load_ts

    def position(self) -> int:
        """The notification id up to which events have been applied (0 when empty)."""
        return self.store.position()

    @contextmanager
    def batch(self, start: int, upto: int) -> Iterator[None]:
        """One transaction applying the events in (start, upto]; conflicts if moved."""
        with self.store.batch(start, upto):
            self._start, self._upto = start, upto
            self._begin_batch()
            yield
            self._before_commit()

    def setup(self) -> None:
        """Create the view's tables if missing."""
        self.store.setup()

    def drop(self) -> None:
        """Remove the view's tables and tracking."""
        self.store.drop()

    def reset(self) -> None:
        """Empty the view and its position at once (rebuild starts from nothing).

        Atomic, so a server running on the same store sees its view go back to position
        0 and catches up again (its next batch is refused and rereads), never a missing table.
        """
        self.store.reset()

    def max_tracking_id(self, application_name: str) -> int | None:
        return self.store.max_tracking_id(application_name)

    def insert_tracking(self, tracking: Tracking) -> None:
        with self.batch(self.store.max_tracking_id(tracking.application_name) or 0,
                        tracking.notification_id):
            pass

    def _begin_batch(self) -> None:
        """Reset what the batch buffers (a read model may override)."""

    def _before_commit(self) -> None:
        """Flush writes buffered during the batch (a read model may override)."""

    def dump(self) -> list[dict[str, Any]]:
        """Every row of the view in a stable order (tests, rebuild checks)."""
        return [dict(r) for r in self._fetch(self.dump_sql, {})]

    def _select(
        self, base: str, conds: list[str], order: str, params: dict[str, Any], limit: int
    ) -> list[Row]:
        params["limit"] = limit
        return self._fetch(f"{base}{where(conds)} ORDER BY {order} LIMIT %(limit)s", params)


def where(conds: Sequence[str]) -> str:
    """` WHERE a AND b` for these conditions; nothing when there are none."""
    return " WHERE " + " AND ".join(conds) if conds else ""


def equal_filters(
    f: Mapping[str, Any], columns: Sequence[str]
) -> tuple[list[str], dict[str, Any]]:
    """`column = value` conditions for the filter's fields that are set."""
    conds = [f"{c} = %({c})s" for c in columns if f.get(c) is not None]
    return conds, {c: f[c] for c in columns if f.get(c) is not None}
