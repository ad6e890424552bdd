"""What free-form JSON may hold before it is recorded: every event must read back as written.

Refused: nesting deeper than MAX_DEPTH (pydantic-core reads back about 200 levels),
NaN and infinities (JSON has none; they would be stored as null), and lone UTF-16
surrogates (they cannot be encoded, so they could not be hashed or stored).
"""

from __future__ import annotations

import math
from typing import Any

from interlock.domain.errors import InvalidRequestError

MAX_DEPTH = 64


class UnsafeJsonError(InvalidRequestError):
    code = "invalid_request"


def check_json(value: Any, what: str) -> None:
    """Raise UnsafeJsonError naming `what` when `value` cannot be recorded faithfully."""
    problem = _problem(value, 0)
    if problem is not None:
        raise UnsafeJsonError(f"{what}: {problem}", field=what)


def _problem(value: Any, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        return _text_problem(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN and infinite numbers are not JSON"
    if isinstance(value, dict):
        children: list[Any] = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple)):
        children = list(value)
    else:
        return None
    for child in children:
        problem = _problem(child, depth + 1)
        if problem is not None:
            return problem
    return None


def _text_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "text holds a lone UTF-16 surrogate"
    return None
