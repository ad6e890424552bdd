"""What any read side offers, whatever its views: freshness, and each view by its kind.

The engine knows no view (eventsourcing's `ProjectionRunner` is the model): the wiring hands
it the views (`projections.views.registry`), and a caller finds one with `view(kind)`.
The queries over particular views are `projections.interface.ReadModels`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, TypeVar

from interlock.projections.engine.pages import Page
from interlock.projections.engine.sql import SqlView
from interlock.projections.engine.stuck import StuckView

__all__ = ["Page", "ReadSide", "StuckView", "V"]

V = TypeVar("V", bound=SqlView)


class ReadSide(Protocol):
    """Views kept current, current to at least the position waited for."""

    def view(self, kind: type[V]) -> V:
        """The view of read model `kind`; LookupError if these read models keep none."""

    def find(self, kind: type[V]) -> V | None:
        """The view of read model `kind`, or None if these read models keep none."""

    def wait(self, position: int | None, timeout: float = 5.0,
             views: Collection[str] | None = None) -> None:
        """Block until every view (or those named) has processed the event at `position`
        (read-your-writes)."""

    def is_current(self) -> bool:
        """True when every view has processed the last recorded event."""

    def lag(self) -> int:
        """How many recorded events some view has not processed yet."""

    def stopped(self) -> bool:
        """True while a view is stuck on an event or the views cannot catch up."""

    def passes(self) -> int:
        """The passes this process's runner made over the log (0: it runs none)."""

    def stuck(self) -> list[StuckView]:
        """The views stuck on an event they cannot apply: which view, which event, why."""

    def close(self) -> None: ...
