"""Rows a batch inserts into a view's private tables, held until they must be written.

A view's per-chat and per-call tables (tenant, agent, tool, input...) get a row on one
event and changes to it on later ones, often in the same batch (a call asked for and
interrupted, a chat started and fingerprinted). Held here, those changes fold into the
row, and the rows of a batch go out as one executemany instead of a statement each.

The rule that keeps this exact: a held row is invisible to SQL until flushed, so the view
writes every change to a held row into it (`held`), and flushes (`flush`, all of its
buffers in order) before any statement that reads or changes its rows in SQL, and at
the end of the batch. A row not held has had every earlier write of the batch executed,
so the view writes it in SQL as before. A second insert of a held key flushes the first,
so a duplicate fails (and is named) as it did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from interlock.projections.engine.sql import Key

RunMany = Callable[[str, Sequence[Mapping[str, Any]]], None]


class Held:
    """One table's rows inserted in this batch and not written yet, by key."""

    __slots__ = ("rows", "template")

    def __init__(self, template: str) -> None:
        self.template = template
        self.rows: dict[Key, dict[str, Any]] = {}

    def holds_chat(self, chat_id: str) -> bool:
        """Whether a row of `chat_id` is held (keys begin with the chat's id)."""
        return any(key[0] == chat_id for key in self.rows)

    def write(self, run_many: RunMany) -> None:
        if self.rows:
            rows, self.rows = list(self.rows.values()), {}
            run_many(self.template, rows)


class Buffers:
    """A view's held tables, flushed in the order given (a table whose inserts read
    another's rows comes after it)."""

    __slots__ = ("held", "run_many")

    def __init__(self, run_many: RunMany, *held: Held) -> None:
        self.run_many, self.held = run_many, held

    def any(self) -> bool:
        return any(h.rows for h in self.held)

    def flush(self) -> None:
        for h in self.held:
            h.write(self.run_many)

    def clear(self) -> None:
        for h in self.held:
            h.rows.clear()

    def insert(self, held: Held, key: Key, row: dict[str, Any]) -> None:
        """Hold `row`; a key held already is flushed first (its duplicate fails as before)."""
        if key in held.rows:
            self.flush()
        held.rows[key] = row
