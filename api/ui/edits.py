"""A held call's edits as later viewers read them: who changed the input, why, old -> new."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from interlock.api.schemas import EventPublic
from interlock.domain.chat.state import ToolCall

_ABSENT: Any = object()


@dataclass(frozen=True)
class Change:
    """One field an edit changed (`path` like `to.iban`); None on a side where it was not."""

    path: str
    old: Any
    new: Any


@dataclass(frozen=True)
class EditView:
    actor: str
    at: datetime
    reason: str | None
    changes: tuple[Change, ...]


def edit_history(call: ToolCall, events: Sequence[EventPublic]) -> tuple[EditView, ...]:
    """Each edit of `call`, in order, against the input it replaced."""
    before = call.original_input if call.original_input is not None else call.input
    found = []
    for e in events:
        d = e.data if isinstance(e.data, Mapping) else {}
        if e.type != "ApprovalVoted" or d.get("ref") != call.ref or d.get("vote") != "edit":
            continue
        after = d.get("edited_input")
        found.append(EditView(actor=str(d.get("actor") or e.actor), at=e.timestamp,
                              reason=d.get("reason"), changes=diff(before, after)))
        before = after
    return tuple(found)


def diff(old: Any, new: Any, path: str = "") -> tuple[Change, ...]:
    """The leaves that differ between two JSON values, objects compared key by key."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        keys = [*old, *(k for k in new if k not in old)]
        return tuple(c for k in keys for c in diff(old.get(k, _ABSENT), new.get(k, _ABSENT),
                                                     f"{path}.{k}" if path else str(k)))
    if old == new:
        return ()
    return (Change(path or "value", None if old is _ABSENT else old,
                   None if new is _ABSENT else new),)


def changed_inputs(calls: Mapping[str, ToolCall], refs: Sequence[str]) -> dict[str, ToolCall]:
    """The calls among `refs` whose input someone replaced: the conversation shows theirs."""
    found = {ref: calls.get(ref) for ref in refs}
    return {ref: c for ref, c in found.items() if c is not None and c.input_by is not None}
