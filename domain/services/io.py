"""Where the store work of commands runs: in place for a lone command, on the I/O threads
when several are under way, so no chat waits on another's disk."""

from __future__ import annotations

import asyncio
import queue
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from functools import partial, wraps
from typing import Any, ParamSpec, Protocol, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


class IoThreads:
    """The I/O threads and the count of commands under way on this event loop."""

    def __init__(self, threads: int) -> None:
        # Sized so that concurrent turns' commits meet in one group commit instead of
        # queueing for a thread.
        self._pool = _Hands(threads)
        self._active = 0  # commands under way on this event loop (see off_loop)
        self._lock = threading.Lock()

    @contextmanager
    def together(self) -> Iterator[None]:
        """Count one more command under way: commands started inside offload their store work."""
        # The sweeper's thread counts too: a lost update would leave the count wrong for good.
        with self._lock:
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1

    async def off_loop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking store work on the I/O threads, so no chat waits on another's disk.

        A lone command runs it in place: a thread hop costs it more than anyone waits.
        """
        if self._active <= 1:
            return fn(*args, **kwargs)
        return await self._pool.run(partial(fn, *args, **kwargs))

    async def batch(self, commands: Awaitable[T]) -> T:
        """Await `commands` (a gather of several) counted as under way together from the
        start, so that even the first offloads its store work and their commits meet."""
        with self.together():
            return await commands

    def close(self) -> None:
        self._pool.close()


_Work = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


class _Hands:
    """At most `size` threads that run store work for an event loop and hand its outcome
    back to the loop's future: one queue and one `call_soon_threadsafe` a call.

    `loop.run_in_executor` over a `ThreadPoolExecutor` chains a `concurrent.futures.Future`
    (its condition, its callbacks) to the loop's future: 24-29 microseconds of CPU a hop
    against 6-8 here (bench/HISTORY.md), and a busy server's cycle makes several. As there,
    work whose caller stopped waiting before it began is not run, work under way runs to its
    end (its outcome dropped), the caller's context variables are not carried over, and at
    the interpreter's exit the work queued is done before the threads are let go.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"the I/O threads need at least one thread, not {size}")
        self.size = size
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for work
        self._queued = 0  # work put and not yet taken: more than idle threads, add one
        self._lock = threading.Lock()  # the counts, the threads, and closing against putting
        self._closed = False
        _LIVE.add(self)

    def run(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """`fn()` on one of the threads; the running loop's future of its outcome."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the I/O threads are closed")
            if self._queued + 1 > self._idle and len(self._threads) < self.size:
                thread = threading.Thread(target=self._serve, daemon=True,
                                          name=f"interlock-io_{len(self._threads)}")
                thread.start()  # raises (no thread to be had) with nothing counted or queued
                self._threads.append(thread)
            self._queued += 1
            self._work.put((loop, future, fn))
        return future

    def _serve(self) -> None:
        take = self._work.get
        while True:
            with self._lock:
                self._idle += 1
            work = take()
            with self._lock:
                self._idle -= 1
                self._queued -= work is not None
            if work is None:
                return
            loop, future, fn = work
            del work
            if not future.cancelled():  # else its caller stopped waiting before it began
                try:
                    outcome, failure = fn(), None
                except BaseException as exc:  # noqa: BLE001 - handed to the caller, as an executor does
                    outcome, failure = None, exc
                with suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting
                    loop.call_soon_threadsafe(_settle, future, outcome, failure)
                del outcome, failure
            del loop, future, fn  # keep nothing of it alive while idle

    def close(self, wait: bool = False) -> None:
        """Let the threads end once the work queued is done; `wait`: until they have."""
        with self._lock:
            if not self._closed:
                self._closed = True
                for _ in self._threads:
                    self._work.put(None)
            threads = list(self._threads)
        if wait:
            for thread in threads:
                thread.join()


def _settle(future: asyncio.Future[Any], outcome: Any, failure: BaseException | None) -> None:
    if future.cancelled():
        return
    if failure is None:
        future.set_result(outcome)
    elif isinstance(failure, StopIteration):  # a future refuses it (as run_in_executor's)
        future.set_exception(RuntimeError(f"store work raised StopIteration: {failure!r}"))
    else:
        future.set_exception(failure)


_LIVE: weakref.WeakSet[_Hands] = weakref.WeakSet()


def _at_exit() -> None:
    """As `concurrent.futures` does: before the interpreter lets daemon threads go, the I/O
    threads finish what was queued (a commit under way is written, not cut)."""
    for hands in list(_LIVE):
        hands.close(wait=True)


threading._register_atexit(_at_exit)  # type: ignore[attr-defined]  # the executors' own hook


class HasIo(Protocol):
    io: IoThreads


def counted(
    command: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Count the command as under way while it runs (the service is its first argument)."""

    @wraps(command)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        service: HasIo = args[0]  # type: ignore[assignment]
        with service.io.together():
            return await command(*args, **kwargs)

    return run
