"""Opaque keyset cursors: the sort key of a page's last row, base64url JSON."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any

from interlock.domain.errors import InvalidRequestError
from interlock.projections.engine.sql import Key


def encode(key: Key) -> str:
    first, *rest = key
    raw = json.dumps([first.isoformat(), *rest], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str | None, *rest_types: type) -> Key | None:
    """The key a cursor holds: a time, then values of `rest_types`; else invalid_request."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        first, *rest = json.loads(raw)
        at = datetime.fromisoformat(first)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise InvalidRequestError(f"invalid cursor {cursor!r}") from exc
    if at.tzinfo is None or not _fits(rest, rest_types) or not _in_utc_range(at):
        raise InvalidRequestError(f"invalid cursor {cursor!r}")
    return (at, *rest)


def _in_utc_range(at: datetime) -> bool:
    """Year 1 at +14:00 is year 0 in UTC, which no store (nor Python) can hold."""
    try:
        at.astimezone(UTC)
    except OverflowError:
        return False
    return True


def _fits(values: list[Any], types: tuple[type, ...]) -> bool:
    if len(values) != len(types):
        return False
    return all(type(v) is t and _in_range(v) for v, t in zip(values, types, strict=True))


def _in_range(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63
