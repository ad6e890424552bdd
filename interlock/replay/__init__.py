"""Replay as a test: a new agent version against recorded chats (docs/replay.md).

    report = replay_test("postgresql://app@db/interlock", ReplayOptions(agents=NEW),
                         Selection(agent="bankingAgent"))
    assert report.passed, report.summary()
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from interlock.domain.application import Interlock
from interlock.domain.storage.keys import Keyring
from interlock.replay.differences import KINDS, Difference, Kind
from interlock.replay.report import Allowed, Report, load_allowed
from interlock.replay.runner import ChatResult, Replayer, ReplayOptions
from interlock.replay.source import Selection, open_recorded, pages

__all__ = [
    "KINDS",
    "Allowed",
    "ChatResult",
    "Difference",
    "Kind",
    "ReplayOptions",
    "Report",
    "Selection",
    "load_allowed",
    "open_recorded",
    "replay_recorded",
    "replay_test",
]

Progress = Callable[[int], None]


def replay_test(store: str, options: ReplayOptions, selection: Selection | None = None,
                allowed: Sequence[Allowed] = (), *, secret: bytes | Keyring | None = None,
                progress: Progress | None = None) -> Report:
    """Replay the selected chats of `store` (opened read-only) on `options.agents`."""
    recorded = open_recorded(store, secret)
    try:
        return replay_recorded(recorded, options, selection, allowed, progress=progress)
    finally:
        recorded.close()


def replay_recorded(recorded: Interlock, options: ReplayOptions,
                    selection: Selection | None = None, allowed: Sequence[Allowed] = (), *,
                    progress: Progress | None = None) -> Report:
    """`replay_test` on a store already open (it is only read)."""
    started = time.perf_counter()
    results = asyncio.run(_replay_all(recorded, options, selection or Selection(), progress))
    return Report.of(results, list(allowed), time.perf_counter() - started)


async def _replay_all(recorded: Interlock, options: ReplayOptions, selection: Selection,
                      progress: Progress | None) -> list[ChatResult]:
    replayer = Replayer(options)
    results: list[ChatResult] = []
    try:
        for page in pages(recorded, selection):
            for events in page:
                recording = replayer.recording(events)
                if recording is not None:
                    results.append(await replayer.replay(recording))
                if progress is not None:
                    progress(len(results))
    finally:
        replayer.close()
    return results
