"""What free-form JSON may hold before it is recorded: every event must read back as written.

Refused: nesting deeper than MAX_DEPTH (pydantic-core reads back about 200 levels),
NaN and infinities (JSON has none; they would be stored as null), and lone UTF-16
surrogates (they cannot be encoded, so they could not be hashed or stored).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from json import encoder
from typing import Any

from interlock.domain.errors import InvalidRequestError

MAX_DEPTH = 64


class UnsafeJsonError(InvalidRequestError):
    code = "invalid_request"


def c_json_encoder(
    *, ensure_ascii: bool, separators: tuple[str, str], allow_nan: bool
) -> Callable[[Any, int], Any] | None:
    """C's JSON encoder made once (`json.dumps` builds one in Python on every call), as
    `json.dumps` with these options writes; call it `(value, 0)` and join the parts.
    Without a circular check: a cycle raises RecursionError. None without the C
    accelerator."""
    make = getattr(encoder, "c_make_encoder", None)  # untyped: the accelerator's
    if make is None:
        return None
    quote = encoder.encode_basestring_ascii if ensure_ascii else encoder.encode_basestring
    made: Callable[[Any, int], Any] = make(
        None, json.JSONEncoder().default, quote, None, separators[1], separators[0],
        False, False, allow_nan)
    return made


# Strict: NaN and infinities raise (keys too). None: everything is walked.
_ENCODE = c_json_encoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def check_json(value: Any, what: str) -> None:
    """Raise UnsafeJsonError naming `what` when `value` cannot be recorded faithfully."""
    if _plainly_safe(value):
        return
    problem = _problem(value, 0)
    if problem is not None:
        raise UnsafeJsonError(f"{what}: {problem}", field=what)


def _plainly_safe(value: Any) -> bool:
    """True when C's JSON encoder writes `value` strictly (no NaN, no infinity), in text
    UTF-8 can hold, with at most MAX_DEPTH brackets (so nested no deeper): nothing
    `_problem` refuses. Walking it in Python cost a served cycle 65 calls; anything not
    plainly safe (other types, brackets in its text) is walked, which names the problem."""
    if _ENCODE is None:
        return False
    try:
        text = "".join(_ENCODE(value, 0))
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False
    return text.count("[") + text.count("{") <= MAX_DEPTH


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
