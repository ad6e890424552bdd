"""Keyset pages: a list of rows and the opaque cursor of the next page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from pydantic import BaseModel

from interlock.projections.engine import cursors
from interlock.projections.engine.sql import Key

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list; `next_cursor` is None on the last page."""

    items: list[T]
    next_cursor: str | None = None


def paginate(rows: list[T], limit: int, key: Callable[[T], Key]) -> Page[T]:
    """The first `limit` of `rows` (fetched `limit + 1`), with a cursor if more remain."""
    more = len(rows) > limit
    items = rows[:limit]
    return Page(items=items, next_cursor=cursors.encode(key(items[-1])) if more else None)
