"""Prometheus metrics at `/metrics`.

Counts of what the service did (decisions, turns, model calls) are read from the event log
at scrape time, so every worker reports the same, complete figures. HTTP request counts are
the scraped process's own, unless `PROMETHEUS_MULTIPROC_DIR` names a directory the workers
share (prometheus_client's multiprocess mode): then every worker answers the sum of all.
Pending approvals and view lag are read when scraped.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.persistence import PersistenceError
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from interlock.api.observability.oversight import Oversight
from interlock.domain import Interlock
from interlock.domain.chat.approval_events import (
    ApprovalRequested,
    ApprovalVoted,
    InterruptExpired,
    InterruptWithdrawn,
)
from interlock.domain.chat.events import (
    ChatStarted,
    Interrupted,
    ModelResponded,
    Responded,
    Restarted,
    TurnFinished,
    TurnRetried,
    UserMessageSent,
)
from interlock.domain.errors import UnavailableError
from interlock.projections.interface import ReadModels

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BATCH = 1000
WAIT_BUCKETS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600, float("inf"))
TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, float("inf"))
# A decision event and its kind, the decision log's (`GET /v1/decisions`): one line each.
DECISION_KINDS: dict[type[Any], Callable[[Any], str]] = {
    Responded: lambda e: "respond",
    Restarted: lambda e: "restart",
    ApprovalVoted: lambda e: str(e.vote),  # approve, edit, reject
    InterruptWithdrawn: lambda e: "withdraw",
    InterruptExpired: lambda e: "expire",
}
ASKED = (Interrupted, ApprovalRequested)


def settles(event: Any) -> bool:
    """Whether a decision ends its interrupt (a vote may leave the approval waiting)."""
    return not isinstance(event, ApprovalVoted) or event.outcome != "pending"


_ATTEMPTS = re.compile(r"\(after (\d+) attempts\)")


def provider_of(model: object) -> str:
    """`openai:gpt-4.1` → `openai`; a Model object → its name."""
    if isinstance(model, str):
        return model.partition(":")[0]
    return str(getattr(model, "name", "unknown"))


class StoreProbe(Protocol):
    """What the API reads of the store's guard (PostgreSQL's probe), handed over by the
    wiring: whether the store answers now, why not, and how often it stopped."""

    @property
    def up(self) -> bool: ...

    @property
    def outages(self) -> int: ...

    @property
    def reason(self) -> str | None: ...


class Metrics:
    """The registry, the process's HTTP counts, and the log follower feeding the rest."""

    def __init__(self, service: Interlock, views: ReadModels,
                 guard: StoreProbe | None = None) -> None:
        self.service, self.views, self.guard = service, views, guard
        self.registry = r = CollectorRegistry()
        shared = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        if shared:
            r.register(_AllWorkers("interlock_http_requests"))
        self.http = Counter("interlock_http_requests", "HTTP requests answered",
                            ["method", "route", "status"], registry=None if shared else r)
        self._http_children: dict[tuple[str, str, int], Any] = {}
        self.decisions = Counter("interlock_decisions", "Decisions recorded", ["kind"],
                                 registry=r)
        self.decision_seconds = Histogram(
            "interlock_decision_seconds", "Time from an interrupt to its decision", ["kind"],
            buckets=WAIT_BUCKETS, registry=r)
        self.turns = Counter("interlock_turns", "Turns finished", ["finish_reason"], registry=r)
        self.turn_seconds = Histogram("interlock_turn_seconds", "Turn duration, start to finish",
                                      ["finish_reason"], buckets=TURN_BUCKETS, registry=r)
        self.model_calls = Counter("interlock_model_calls", "Model replies recorded",
                                   ["provider"], registry=r)
        self.model_errors = Counter("interlock_model_errors", "Turns failed by the model",
                                    ["provider"], registry=r)
        self.model_retries = Counter("interlock_model_retries",
                                     "Retries spent on calls that failed", ["provider"],
                                     registry=r)
        r.register(_ScrapeTime(self))
        r.register(Oversight(views))
        self._lock = threading.Lock()
        self._position = 0
        self._agent_of: dict[UUID, str] = {}
        self._asked: dict[tuple[UUID, str], datetime] = {}
        self._began: dict[UUID, datetime] = {}

    def count_http(self, method: str, route: str, status: int) -> None:
        """One more request answered: the counter's child for these labels, found once
        (`labels` checks and joins its arguments under a lock on every call)."""
        key = (method, route, status)
        child = self._http_children.get(key)
        if child is None:
            if len(self._http_children) > 4096:  # routes are templates: a bound, not a need
                self._http_children.clear()
            child = self._http_children[key] = self.http.labels(method, route, str(status))
        child.inc()

    def render(self) -> bytes:
        """The exposition, after following the log to its head (while the store answers:
        without it, the counts stay as they were and the store's state says why)."""
        with suppress(UnavailableError, PersistenceError):
            self.follow()
        return bytes(generate_latest(self.registry))

    def follow(self) -> None:
        """Count the events recorded since the last scrape."""
        with self._lock:
            recorder, head = self.service.recorder, self.service.position()
            while self._position < head:
                notes = recorder.select_notifications(self._position, BATCH, stop=head,
                                                      inclusive_of_start=False)
                if not notes:
                    break
                for note in notes:
                    self._count(self.service.mapper.to_domain_event(note))
                self._position = notes[-1].id

    def _provider(self, chat: UUID) -> str:
        agent = self.service.agents.get(self._agent_of.get(chat, ""))
        return provider_of(agent.model) if agent is not None else "unknown"

    def _count(self, event: Any) -> None:
        chat = event.originator_id
        if isinstance(event, ChatStarted):
            self._agent_of[chat] = event.agent
        if isinstance(event, ASKED):
            self._asked[(chat, event.ref)] = event.timestamp
        kind = DECISION_KINDS.get(type(event))
        if kind is not None:
            self._decided(chat, event, kind(event))
        if isinstance(event, (UserMessageSent, TurnRetried)):
            self._began.setdefault(chat, event.timestamp)
        if isinstance(event, ModelResponded):
            self.model_calls.labels(self._provider(chat)).inc()
        if isinstance(event, TurnFinished):
            self._finished(chat, event)

    def _decided(self, chat: UUID, event: Any, kind: str) -> None:
        """Count a decision and its wait since the request; one that settles starts a turn."""
        self.decisions.labels(kind).inc()
        key = (chat, event.ref)
        asked = self._asked.pop(key, None) if settles(event) else self._asked.get(key)
        if asked is not None:
            self.decision_seconds.labels(kind).observe(
                (event.timestamp - asked).total_seconds())
        if settles(event):
            self._began.setdefault(chat, event.timestamp)

    def _finished(self, chat: UUID, event: TurnFinished) -> None:
        self.turns.labels(event.reason).inc()
        began = self._began.pop(chat, None)
        if began is not None:
            self.turn_seconds.labels(event.reason).observe(
                (event.timestamp - began).total_seconds())
        provider = self._provider(chat)
        # A model's failure is recorded as its ModelError, which begins with the provider
        # ("openai: 503 ...") or the model's name; a tool's or the loop's does not.
        if event.reason == "failed" and (event.error or "").startswith(provider):
            self.model_errors.labels(provider).inc()
            attempts = _ATTEMPTS.search(event.error or "")
            if attempts:
                self.model_retries.labels(provider).inc(int(attempts.group(1)) - 1)


class _AllWorkers(Collector):
    """One metric summed over every worker's multiprocess files (the others are per worker)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._files = MultiProcessCollector(None)  # type: ignore[no-untyped-call]  # untyped lib

    def collect(self) -> Iterator[Metric]:
        for family in self._files.collect():  # type: ignore[no-untyped-call]
            if family.name == self.name:
                yield family


class _ScrapeTime(Collector):
    """Gauges read when scraped: pending approvals by agent and tool, view lag."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from _store_state(self.metrics)
        try:
            counts, behind = _pending(self.metrics.views), self.metrics.views.lag()
        except (UnavailableError, PersistenceError):
            return  # the store is down: what it holds cannot be counted now
        pending = GaugeMetricFamily("interlock_pending_approvals",
                                    "Interrupts awaiting a decision", labels=["agent", "tool"])
        for (agent, tool), n in sorted(counts.items()):
            pending.add_metric([agent, tool], n)
        yield pending
        lag = GaugeMetricFamily("interlock_view_lag_events",
                                "Recorded events some read model has not processed")
        lag.add_metric([], behind)
        yield lag


def _store_state(metrics: Metrics) -> Iterator[Metric]:
    """Whether the store answers (PostgreSQL's probe), its outages; the views failing, stuck,
    and the passes this process made."""
    guard = metrics.guard
    if guard is not None:
        up = GaugeMetricFamily("interlock_store_up", "1 while the store answers its probe")
        up.add_metric([], 1 if guard.up else 0)
        yield up
        outages = GaugeMetricFamily("interlock_store_outages",
                                    "Times this process saw the store stop answering")
        outages.add_metric([], guard.outages)
        yield outages
    views = metrics.views
    failing = GaugeMetricFamily("interlock_views_failing",
                                "1 while the views' passes fail (retried with backoff)")
    failing.add_metric([], 1 if views.stopped() and not views.stuck() else 0)
    yield failing
    stuck = GaugeMetricFamily("interlock_views_stuck", "Views stuck on an event")
    stuck.add_metric([], len(views.stuck()))
    yield stuck
    passes = CounterMetricFamily("interlock_views_passes",
                                 "Passes this process made applying the log to the views")
    passes.add_metric([], views.passes())
    yield passes


def _pending(views: ReadModels) -> dict[tuple[str, str], int]:
    """Counted in SQL: reading every pending row (a staged call's stage worked out from its
    JSON) took seconds a scrape at 100,000 pending."""
    return views.inbox_pending()
