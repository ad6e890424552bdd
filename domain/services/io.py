"""Where the store work of commands runs: in place for a lone command, on the I/O threads
when several are under way, so no chat waits on another's disk."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial, wraps
from typing import Any, ParamSpec, Protocol, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


class IoThreads:
    """The I/O threads and the count of commands under way on this event loop."""

    def __init__(self, threads: int) -> None:
        # Sized so that concurrent turns' commits meet in one group commit instead of
        # queueing for a thread.
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="interlock-io")
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
        running = asyncio.get_running_loop()
        return await running.run_in_executor(self._pool, partial(fn, *args, **kwargs))

    async def batch(self, commands: Awaitable[T]) -> T:
        """Await `commands` (a gather of several) counted as under way together from the
        start, so that even the first offloads its store work and their commits meet."""
        with self.together():
            return await commands

    def close(self) -> None:
        self._pool.shutdown(wait=False)


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
