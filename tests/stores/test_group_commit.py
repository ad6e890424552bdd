"""Group commit on PostgreSQL: many chats in one transaction, each chat's version check its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from interlock.bootstrap import build_service
from interlock.stores.groupcommit import Append, GroupCommit
from interlock.stores.postgres import InterlockPostgresRecorder


def events(chat: uuid.UUID, first: int, count: int = 3) -> list[StoredEvent]:
    return [
        StoredEvent(originator_id=chat, originator_version=v, topic="t", state=b"{}")
        for v in range(first, first + count)
    ]


@contextmanager
def held_first_flush(recorder: InterlockPostgresRecorder, waiting: int) -> Iterator[None]:
    """The first flush waits until `waiting` more appends are queued behind it."""
    group = recorder.group_commit
    flush = group.flush
    first = threading.Event()

    def slow(batch: list[Append]) -> None:
        if not first.is_set():
            first.set()
            deadline = time.monotonic() + 10
            while len(group._queue) < waiting and time.monotonic() < deadline:
                time.sleep(0.001)
        flush(batch)

    group.flush = slow
    try:
        yield
    finally:
        group.flush = flush


def run_threads(*targets: Callable[[], object]) -> list[object]:
    results: list[object] = [None] * len(targets)

    def run(n: int) -> None:
        try:
            results[n] = targets[n]()
        except IntegrityError as exc:
            results[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(targets))]
    for t in threads:
        t.start()
        time.sleep(0.002)  # the first one leads
    for t in threads:
        t.join(timeout=30)
    return results


@pytest.fixture
def recorder(pg_store: str) -> Iterator[InterlockPostgresRecorder]:
    app = build_service(pg_store)
    assert isinstance(app.recorder, InterlockPostgresRecorder)
    yield app.recorder
    app.close()


def test_appends_that_wait_together_commit_in_one_batch(
    recorder: InterlockPostgresRecorder,
) -> None:
    chats = [uuid.uuid4() for _ in range(9)]
    with held_first_flush(recorder, waiting=8):
        results = run_threads(*(lambda c=c: recorder.insert_events(events(c, 1)) for c in chats))
    assert recorder.group_commit.batches == 2
    assert recorder.group_commit.appends == 9
    ids = [i for r in results for i in r]  # type: ignore[attr-defined]
    assert sorted(ids) == ids[:3] + sorted(ids[3:]) and len(set(ids)) == 27
    stored = recorder.select_notifications(None, 100)
    assert [n.id for n in stored] == sorted(ids)


def test_a_conflict_fails_its_own_chat_alone(recorder: InterlockPostgresRecorder) -> None:
    taken = uuid.uuid4()
    recorder.insert_events(events(taken, 1))
    others = [uuid.uuid4() for _ in range(4)]
    with held_first_flush(recorder, waiting=5):
        results = run_threads(
            lambda: recorder.insert_events(events(uuid.uuid4(), 1)),
            *(lambda c=c: recorder.insert_events(events(c, 1)) for c in others[:2]),
            lambda: recorder.insert_events(events(taken, 3)),  # overlaps version 3
            *(lambda c=c: recorder.insert_events(events(c, 1)) for c in others[2:]),
        )
    assert isinstance(results[3], IntegrityError)
    assert all(isinstance(r, list) and len(r) == 3 for n, r in enumerate(results) if n != 3)
    assert recorder.group_commit.batches == 3  # the lone first append, then the rest together
    versions = [e.originator_version for e in recorder.select_events(taken)]
    assert versions == [1, 2, 3]
    for chat in others:
        assert [e.originator_version for e in recorder.select_events(chat)] == [1, 2, 3]


def test_two_appends_of_one_chat_never_share_a_batch(
    recorder: InterlockPostgresRecorder,
) -> None:
    chat = uuid.uuid4()
    with held_first_flush(recorder, waiting=2):
        results = run_threads(
            lambda: recorder.insert_events(events(uuid.uuid4(), 1)),
            lambda: recorder.insert_events(events(chat, 1)),
            lambda: recorder.insert_events(events(chat, 1, count=2)),
        )
    assert isinstance(results[1], list) and isinstance(results[2], IntegrityError)
    assert [e.originator_version for e in recorder.select_events(chat)] == [1, 2, 3]


WRITER = """
import sys, threading, uuid
from eventsourcing.persistence import StoredEvent
from interlock.bootstrap import build_service
app = build_service(sys.argv[1])
lock = threading.Lock()
def work():
    while True:
        chat = uuid.uuid4()
        app.recorder.insert_events([
            StoredEvent(originator_id=chat, originator_version=v, topic="t", state=b"{}")
            for v in (1, 2, 3)])
        with lock:
            print(chat, flush=True)
for _ in range(16):
    threading.Thread(target=work, daemon=True).start()
threading.Event().wait()
"""


def test_a_kill_during_group_commits_loses_no_ack_and_writes_no_half_chat(pg_store: str) -> None:
    build_service(pg_store).close()  # tables exist before the writer starts
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, pg_store], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        acked = [proc.stdout.readline().strip() for _ in range(300)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        acked += [line.strip() for line in proc.stdout if line.strip()]
    url, schema = pg_store.split("?schema=")
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            f'SELECT originator_id::text, count(*) FROM "{schema}".interlock_events '
            "GROUP BY originator_id"
        ).fetchall()
    counts = dict(rows)
    assert all(counts.get(chat) == 3 for chat in acked)
    assert set(counts.values()) == {3}
    assert len(counts) >= len(acked)


class FakeFlush:
    """A flush that records each batch's chats and gives every event an id."""

    def __init__(self) -> None:
        self.batches: list[list[object]] = []
        self.next_id = 0

    def __call__(self, batch: list[Append]) -> None:
        self.batches.append([e.originator_id for a in batch for e in a.events[:1]])
        for append in batch:
            append.ids = list(range(self.next_id, self.next_id + len(append.events)))
            self.next_id += len(append.events)


def test_after_a_shared_batch_the_next_leader_gathers_as_many_appends() -> None:
    flush = FakeFlush()
    group = GroupCommit(flush, gather=30.0)
    group._last = 3  # the last batch held three appends: others are writing
    chats = [uuid.uuid4() for _ in range(3)]
    threads = [threading.Thread(target=group.submit, args=(events(c, 1),)) for c in chats]
    for thread in threads:
        thread.start()
        time.sleep(0.05)  # each arrives while the first leader is gathering
    for thread in threads:
        thread.join(timeout=10)
    assert flush.batches == [chats]


def test_a_lone_writer_never_waits_to_gather() -> None:
    flush = FakeFlush()
    group = GroupCommit(flush, gather=30.0)
    done = threading.Event()

    def write_alone() -> None:
        for _ in range(3):
            group.submit(events(uuid.uuid4(), 1))
        done.set()

    threading.Thread(target=write_alone, daemon=True).start()
    assert done.wait(10), "a lone append waited for others"
    assert [len(b) for b in flush.batches] == [1, 1, 1]
