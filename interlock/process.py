"""What a long-running Interlock process sets up for itself once its code is loaded.

Python's cyclic garbage collector runs a generation-0 pass every 700 container
allocations, and a full pass walks every object the process holds: modules, pydantic's
validators, the chat cache. A turn allocates thousands of short-lived objects (events,
messages, rows) and none of them forms a cycle that outlives the request, so at the
default threshold the collector takes a fifth to two fifths of a busy server's CPU
(measured: docs/operations.md, "Garbage collection"). `tune_gc` moves what is loaded at
start-up out of the collector's sight (`gc.freeze`) and collects less often; memory that
cycles hold is still reclaimed, later.
"""

from __future__ import annotations

import gc

DEFAULT_GC_THRESHOLD = 10_000
_frozen = False


def tune_gc(threshold: int = DEFAULT_GC_THRESHOLD) -> None:
    """Freeze what is loaded now and run generation 0 every `threshold` allocations
    (0 leaves Python's defaults alone)."""
    global _frozen
    if threshold <= 0:
        return
    if not _frozen:  # once: a process building apps again (tests) must not pin each one
        gc.collect()  # what start-up left behind is freed, not frozen
        gc.freeze()
        _frozen = True
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(threshold, older, oldest)
