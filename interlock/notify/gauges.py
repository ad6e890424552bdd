"""What /metrics says of notifications: the rows given up, the rows waiting to be sent, and
the rows never sent because their chat was erased."""

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
            counts = self.store.counts()
        except (PersistenceError, UnavailableError):
            return
        for status, name, text in _GAUGES:
            gauge = GaugeMetricFamily(name, text)
            gauge.add_metric([], counts.get(status, 0))
            yield gauge


_GAUGES = (
    ("failed", "interlock_notifications_failed", "Notifications given up after their retries"),
    ("pending", "interlock_notifications_waiting", "Notifications queued and not yet sent"),
    ("erased", "interlock_notifications_erased",
     "Notifications not sent: their chat's personal data was erased"),
)
