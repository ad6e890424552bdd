"""Opaque keyset cursors: the sort key of a page's last row, base64url JSON."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from domain.errors import InvalidRequestError
from projections.views import Key


def encode(key: Key) -> str:
    first, *rest = key
    raw = json.dumps([first.isoformat(), *rest], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str | None) -> Key | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        first, *rest = json.loads(raw)
        return (datetime.fromisoformat(first), *rest)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise InvalidRequestError(f"invalid cursor {cursor!r}") from exc


def page_key(row: Any, *fields: str) -> Key:
    return tuple(getattr(row, f) for f in fields)
