"""One event loop, on a thread of its own, owns every MCP connection of the process.

A connection (a stdio subprocess, an HTTP session) lives in a task that entered the SDK's
context managers and must leave them; turns run on whatever loop serves them (uvicorn's,
a test's `asyncio.run`), which may close while the connection should live on. So the
connections live here and callers hop over: `await on_mcp_loop(coro)` from a loop,
`block_on_mcp_loop(coro)` from plain code (an agent module being imported).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def mcp_loop() -> asyncio.AbstractEventLoop:
    """The loop the connections live on, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_serve, args=(_loop,), name="interlock-mcp",
                                       daemon=True)
            _thread.start()
        return _loop


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def on_mcp_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the MCP loop; cancelling the caller cancels it there too."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, mcp_loop()))


def block_on_mcp_loop(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Run `coro` on the MCP loop and wait for it (never from the MCP loop itself)."""
    future = asyncio.run_coroutine_threadsafe(coro, mcp_loop())
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise


def stop_mcp_loop(closing: Coroutine[Any, Any, None], timeout: float = 10.0) -> None:
    """Run `closing` (which closes the connections), then stop and close the loop."""
    global _loop, _thread
    with _lock:
        loop, thread, _loop, _thread = _loop, _thread, None, None
    if loop is None or thread is None:
        closing.close()
        return
    try:
        asyncio.run_coroutine_threadsafe(closing, loop).result(timeout)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)


def register_exit(closing: Any) -> None:
    """Close the connections when the interpreter exits (their subprocesses end with it)."""
    atexit.register(lambda: stop_mcp_loop(closing()))
