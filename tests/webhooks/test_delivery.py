"""The deliverer against receivers that misbehave, and against a store that goes away."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from interlock.projections.views.webhooks import Due
from interlock.webhooks import Deliverer, DeliveryPolicy
from interlock.webhooks.addresses import AddressPolicy
from tests.observability.receiver import Receiver
from tests.webhooks.kit import LOCAL, RawServer, hub, read_request, until

SECRET = "whsec_" + "A" * 32


class OneDue:
    """An outbox with one due delivery to `url`, recording how attempts were settled."""

    def __init__(self, url: str, tenant: str = "acme") -> None:
        self.due = [Due("msg_1_sub", 1, '{"type":"turn.finished"}', url, SECRET, tenant)]
        self.settled: list[tuple[str, str, str | None]] = []

    def claim(self, limit: int, lease: timedelta, per_tenant: int = 1,
              busy: dict[str, int] | None = None) -> list[Due]:
        due, self.due = self.due, []
        return due

    def settle(self, delivery_id: str, status: str, next_at: datetime,
               error: str | None) -> None:
        self.settled.append((delivery_id, status, error))

    def prune(self, before: datetime) -> int:
        return 0


def attempt(url: str, policy: DeliveryPolicy,
            addresses: AddressPolicy | None = None) -> tuple[str, str | None, float]:
    """One attempt to `url`: how it was settled, its error, how long it took."""
    view = OneDue(url)
    deliverer = Deliverer(view, policy, addresses)
    started = time.monotonic()
    try:
        assert deliverer.run_once() == 1
        assert deliverer.idle(timeout=30)
    finally:
        deliverer.stop()
    [(_, status, error)] = view.settled
    return status, error, time.monotonic() - started


def test_a_huge_answer_is_not_read() -> None:
    """D20: a receiver answering 128 MB gets its connection closed after the status line."""
    size, sent = 128 << 20, [0]

    def flood(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        chunk = b"x" * (1 << 20)
        while sent[0] < size:
            conn.sendall(chunk)
            sent[0] += len(chunk)

    server = RawServer(flood)
    try:
        status, error, _ = attempt(server.url, DeliveryPolicy(timeout=20, allow=LOCAL))
    finally:
        server.close()
    assert (status, error) == ("delivered", None)
    until(lambda: server.connections == 1)
    assert sent[0] < 32 << 20  # the socket buffers' worth at most, not the body


def test_a_slow_drip_is_cut_at_the_attempts_deadline() -> None:
    """D21: a byte every 0.2 s keeps every read alive; the attempt's deadline still ends it."""
    def drip(conn: socket.socket) -> None:
        read_request(conn)
        for _ in range(75):  # 15 s, then the old per-read timeout would end too
            conn.sendall(b"H")
            time.sleep(0.2)

    server = RawServer(drip)
    try:
        status, error, took = attempt(server.url, DeliveryPolicy(timeout=1, allow=LOCAL))
    finally:
        server.close()
    assert status == "pending" and error is not None and "deadline" in error
    assert took < 3


@pytest.fixture
def hanging() -> Iterator[RawServer]:
    """Accepts every connection and never answers."""
    release = threading.Event()

    def hang(conn: socket.socket) -> None:
        release.wait(30)

    server = RawServer(hang)
    yield server
    release.set()
    server.close()


def test_a_hanging_tenant_does_not_hold_up_another(sqlite_store: str,
                                                   hanging: RawServer) -> None:
    """D21: four notifications of acme to a receiver that hangs, then one of globex: globex's
    arrives while acme's still hang (they hold at most two of the four senders)."""
    receiver = Receiver()
    receiver.up()
    policy = DeliveryPolicy(timeout=10, workers=4, per_tenant=2, poll=0.05, allow=LOCAL)
    with hub(sqlite_store) as h:
        h.subs.subscribe("acme", hanging.url, "127.0.0.1", ["turn.finished"], "root")
        receiver.secret = h.subs.subscribe("globex", receiver.url, "127.0.0.1",
                                           ["turn.finished"], "gina").secret
        for _ in range(4):
            h.turn("acme")
        h.turn("globex")
        h.current()
        deliverer = Deliverer(h.hooks, policy, h.subs.addresses)
        started = time.monotonic()
        deliverer.start()
        try:
            until(lambda: len(receiver.received) == 1, timeout=9)
            took = time.monotonic() - started
            assert hanging.connections == 2  # acme's other two wait for a free slot of theirs
        finally:
            receiver.down()
            hanging.close()
            deliverer.stop()
    assert took < 3


class Unreachable:
    """An outbox whose store is down for the first `outage` claims."""

    def __init__(self, outage: int) -> None:
        self.outage, self.claims = outage, 0
        self.times: list[float] = []

    def claim(self, limit: int, lease: timedelta, per_tenant: int = 1,
              busy: dict[str, int] | None = None) -> list[Due]:
        self.claims += 1
        self.times.append(time.monotonic())
        if self.claims <= self.outage:
            raise psycopg.OperationalError("connection refused")
        return []

    def prune(self, before: datetime) -> int:
        return 0


def test_a_store_outage_is_logged_once_and_delivery_resumes_by_itself(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 33: one line when the store goes, one when it is back; backoff in between."""
    view = Unreachable(outage=4)
    deliverer = Deliverer(view, DeliveryPolicy(poll=0.02, outage_backoff=0.2))  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="interlock.webhooks"):
        deliverer.start()
        try:
            until(lambda: view.claims >= 7, timeout=10)
        finally:
            deliverer.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "interlock.webhooks"]
    assert len(lines) == 2, lines
    assert "paused: the store is unavailable" in lines[0] and "OperationalError" in lines[0]
    assert "resumed" in lines[1]
    gaps = [b - a for a, b in zip(view.times, view.times[1:], strict=False)][:4]
    assert gaps[3] > gaps[0] and gaps[3] >= 0.15  # it waited longer each time, up to the cap


class Kept:
    """An outbox that only records when, and up to when, it was pruned."""

    def __init__(self) -> None:
        self.cutoffs: list[datetime] = []

    def claim(self, limit: int, lease: timedelta, per_tenant: int = 1,
              busy: dict[str, int] | None = None) -> list[Due]:
        return []

    def prune(self, before: datetime) -> int:
        self.cutoffs.append(before)
        return 0


def test_delivered_and_failed_rows_are_pruned_after_the_retention() -> None:
    """D23: the deliverer prunes what is older than the retention, every `prune_every`."""
    view = Kept()
    policy = DeliveryPolicy(poll=0.02, retention=3600, prune_every=0.05)
    deliverer = Deliverer(view, policy)  # type: ignore[arg-type]
    deliverer.start()
    try:
        until(lambda: len(view.cutoffs) >= 2, timeout=5)
    finally:
        deliverer.stop()
    age = datetime.now(UTC) - view.cutoffs[0]
    assert timedelta(minutes=59) < age < timedelta(minutes=61)
