"""One SDK client per event loop: pooled connections belong to the loop that opened them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar
from weakref import WeakKeyDictionary

C = TypeVar("C")


class PerLoop(Generic[C]):
    """Makes a client the first time each running loop asks (`asyncio.run` per call is safe)."""

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._clients: WeakKeyDictionary[asyncio.AbstractEventLoop, C] = WeakKeyDictionary()

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._make()
        return client

    def pop(self) -> C | None:
        """Forget the running loop's client and hand it over for closing."""
        return self._clients.pop(asyncio.get_running_loop(), None)
