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
from typing import Any, ClassVar

from interlock.projections.engine.sql import Key, ReadModel, SqlView, ViewStore

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


class Lookups:
    """A view's own chats and calls tables (a chat's tenant and agent, a call's tool and
    input...), which its rows are joined from, and their rows held in this batch; the
    chats' are flushed first (a call's insert may read its chat's row)."""

    __slots__ = ("buffers", "calls", "chats")

    def __init__(self, run_many: RunMany, chats: str, calls: str) -> None:
        """`chats`, `calls`: the INSERT templates of the two tables."""
        self.chats, self.calls = Held(chats), Held(calls)
        self.buffers = Buffers(run_many, self.chats, self.calls)

    def chat_started(self, chat_id: str, row: dict[str, Any]) -> None:
        self.buffers.insert(self.chats, (chat_id,), row)

    def tool_requested(self, chat_id: str, ref: str, row: dict[str, Any]) -> None:
        self.buffers.insert(self.calls, (chat_id, ref), row)

    def fold_chat(self, chat_id: str, **changes: Any) -> bool:
        """Fold `changes` into the chat's held row; False when it is not held (the caller
        writes them in SQL)."""
        return _fold(self.chats, (chat_id,), changes)

    def fold_call(self, chat_id: str, ref: str, **changes: Any) -> bool:
        """Fold `changes` into the call's held row; False when it is not held."""
        return _fold(self.calls, (chat_id, ref), changes)

    def flush(self) -> None:
        self.buffers.flush()

    def clear(self) -> None:
        self.buffers.clear()


def _fold(held: Held, key: Key, changes: dict[str, Any]) -> bool:
    row = held.rows.get(key)
    if row is None:
        return False
    row.update(changes)
    return True


class JoinedView(SqlView):
    """A view whose rows are joined from its own chats and calls tables (`lookups`), their
    rows of a batch held until a statement reads them or the batch ends."""

    lookup_inserts: ClassVar[tuple[str, str]]  # the INSERT of a chat's row, then a call's

    def __init__(self, store: ViewStore, read_model: ReadModel) -> None:
        super().__init__(store, read_model)
        self.lookups = Lookups(self._run_many, *self.lookup_inserts)

    def _begin_batch(self) -> None:
        self.lookups.clear()

    def _before_commit(self) -> None:
        self.lookups.flush()
