"""Exactly-once: rebuilds, competing runners and a runner killed mid catch-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels, open_views
from interlock.projections.engine.sql import PositionConflictError
from interlock.projections.views.inbox import InboxView
from tests.projections.conftest import dumps, rebuilt
from tests.projections.flows import banking_flows, seed

pytestmark = pytest.mark.anyio


async def test_rebuild_gives_identical_rows(
    app: Interlock, models: SqlReadModels, store: str
) -> None:
    _, position = await seed(app)
    models.wait(position)
    before = dumps(models)
    assert rebuilt(app) == before
    assert all(before)


async def test_two_runners_of_one_view_cannot_both_write(app: Interlock, store: str) -> None:
    await seed(app)
    first, second = open_views(app), open_views(app)
    try:
        head = app.recorder.max_notification_id() or 0
        with first.view(InboxView).batch(0, head):
            pass
        with pytest.raises(PositionConflictError), second.view(InboxView).batch(0, head):
            pass
        assert second.runners[0].catch_up() == head  # the loser rereads and finds it done
    finally:
        first.close()
        second.close()


def _cli(store: str, *args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "interlock.cli.main", "projections", *args, "--store", store]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)


async def test_a_runner_killed_mid_catch_up_resumes_exactly_once(
    app: Interlock, store: str
) -> None:
    for _ in range(15):
        await banking_flows(app)
    head = app.recorder.max_notification_id() or 0
    worker = _cli(store, "run", "--once", "--batch", "7")
    assert worker.stdout is not None
    first = worker.stdout.readline()  # one batch committed: kill it in the middle
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    worker.stdout.close()
    assert first.startswith("inbox: ")
    killed = open_views(app)
    try:
        assert min(killed.positions().values()) < head
    finally:
        killed.close()
    restarted = _cli(store, "run", "--once")
    restarted.communicate()
    assert restarted.returncode == 0
    views = open_views(app)
    try:
        assert min(views.positions().values()) == head
        assert dumps(views) == rebuilt(app)
    finally:
        views.close()
