"""The I/O threads: store work of concurrent commands runs beside the event loop, its
outcome handed back to the awaiting command, as an executor would."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from interlock.domain.services.io import IoThreads, _Hands


class Refused(Exception):
    pass


def test_outcomes_and_failures_come_back_to_the_caller() -> None:
    hands = _Hands(2)

    def fail() -> None:
        raise Refused("no")

    async def main() -> None:
        assert await hands.run(lambda: threading.current_thread().name) != \
            threading.current_thread().name
        with pytest.raises(Refused, match="no"):
            await hands.run(fail)

    asyncio.run(main())
    hands.close()


def test_work_runs_side_by_side_up_to_the_threads_there_are() -> None:
    """Three calls that each wait for the other two finish: three threads ran them at once
    (one queue behind one thread would wait forever); a fourth thread is never made."""
    hands = _Hands(3)
    met = threading.Barrier(3, timeout=5)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(hands.run(met.wait) for _ in range(3))))

    assert sorted(asyncio.run(main())) == [0, 1, 2]

    async def more() -> None:
        await asyncio.gather(*(hands.run(lambda: time.sleep(0.01)) for _ in range(10)))

    asyncio.run(more())
    assert len(hands._threads) == 3
    hands.close()


def test_work_whose_caller_stopped_waiting_before_it_began_is_not_run() -> None:
    hands = _Hands(1)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def first() -> None:
        started.set()
        release.wait(5)
        ran.append("first")

    async def main() -> None:
        busy = hands.run(first)
        while not started.is_set():
            await asyncio.sleep(0.001)
        queued = hands.run(lambda: ran.append("second"))
        queued.cancel()
        release.set()
        await busy
        await hands.run(lambda: None)  # the queue has moved past the cancelled work

    asyncio.run(main())
    assert ran == ["first"]
    hands.close()


def test_closed_threads_end_and_take_no_more_work() -> None:
    hands = _Hands(2)

    async def main() -> None:
        await asyncio.gather(hands.run(lambda: time.sleep(0.01)), hands.run(lambda: None))

    asyncio.run(main())
    threads = list(hands._threads)
    hands.close()
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()

    async def again() -> None:
        with pytest.raises(RuntimeError, match="closed"):
            hands.run(lambda: None)

    asyncio.run(again())


def test_a_lone_command_runs_its_store_work_in_place_and_concurrent_ones_do_not() -> None:
    io = IoThreads(4)
    here = threading.current_thread()

    async def main() -> tuple[bool, bool]:
        lone = await io.off_loop(threading.current_thread) is here
        with io.together(), io.together():
            shared = await io.off_loop(threading.current_thread) is here
        return lone, shared

    assert asyncio.run(main()) == (True, False)
    io.close()


def test_a_thread_that_cannot_start_fails_that_call_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No thread to be had: the caller is told, nothing is queued behind it, and the slot is
    free for the next call (with one thread, a slot lost would hang every later call)."""
    hands = _Hands(1)
    real = threading.Thread.start
    refused = [True]

    def start(thread: threading.Thread) -> None:
        if refused.pop() if refused else False:
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)

    async def main() -> int:
        with pytest.raises(RuntimeError, match="can't start"):
            hands.run(lambda: 0)
        return await asyncio.wait_for(hands.run(lambda: 7), 5)

    assert asyncio.run(main()) == 7
    assert len(hands._threads) == 1
    hands.close(wait=True)


def test_work_queued_before_closing_is_done_and_closing_can_wait_for_it() -> None:
    hands = _Hands(1)
    done: list[int] = []
    gate = threading.Event()

    async def main() -> None:
        first = hands.run(lambda: gate.wait(5))
        second = hands.run(lambda: done.append(2))
        hands.close()
        gate.set()
        await asyncio.wait_for(asyncio.gather(first, second), 5)

    asyncio.run(main())
    hands.close(wait=True)
    assert done == [2] and not hands._threads[0].is_alive()


def test_store_work_raising_stop_iteration_fails_its_caller_instead_of_hanging() -> None:
    hands = _Hands(1)

    def stops() -> None:
        raise StopIteration

    async def main() -> None:
        with pytest.raises(RuntimeError, match="StopIteration"):
            await asyncio.wait_for(hands.run(stops), 5)

    asyncio.run(main())
    hands.close()


def test_the_io_threads_need_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        _Hands(0)


def test_at_exit_the_work_queued_is_done_before_the_threads_are_let_go(tmp_path: Path) -> None:
    """A process that ends with store work under way (a commit, say) finishes it, as an
    executor's threads would; its caller's loop is gone by then, and nothing complains."""
    mark = tmp_path / "written"
    script = f"""
import asyncio, pathlib, time
from interlock.domain.services.io import _Hands
hands = _Hands(1)
async def main():
    hands.run(lambda: (time.sleep(0.3), pathlib.Path({str(mark)!r}).write_text("done")))
asyncio.run(main())
"""
    ended = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=30)
    assert ended.returncode == 0, ended.stderr
    assert mark.read_text() == "done"
    assert ended.stderr == ""
