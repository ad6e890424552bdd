"""What /metrics says of notifications: the rows given up, the rows waiting to be sent."""

from __future__ import annotations

from collections.abc import Iterator

from eventsourcing.persistence import PersistenceError
from prometheus_client.core import GaugeMetricFamily, Metric

from interlock.domain.errors import UnavailableError
from interlock.notify.store import NotifyStore


class NotifyGauges:
    """Read when scraped; nothing while the store is away."""

    def __init__(self, store: NotifyStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        try:
            failed, waiting = self.store.stuck(), self.store.waiting()
        except (PersistenceError, UnavailableError):
            return
        gauge = GaugeMetricFamily("interlock_notifications_failed",
                                  "Notifications given up after their retries")
        gauge.add_metric([], failed)
        yield gauge
        queued = GaugeMetricFamily("interlock_notifications_waiting",
                                   "Notifications queued and not yet sent")
        queued.add_metric([], waiting)
        yield queued
