"""Canonical JSON and its SHA-256: what decision events record about an input.

`jcs` is RFC 8785 (JSON Canonicalization Scheme): any language with a JCS library gets
the same bytes, so anyone can recompute `input_sha256`. `canonical_json` is the older
form (Python's sorted keys and number repr), kept for format 1 chains and for hashes
recorded by events of format 1.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

_EXACT_INT = 2**53


def canonical_json(value: Any) -> str:
    """Format 1: keys sorted, no spaces, UTF-8 kept (Python's number forms)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def jcs(value: Any) -> str:
    """RFC 8785: keys in UTF-16 order, ECMAScript number forms, minimal string escapes."""
    kind = type(value)  # the plain types first, each by its exact class: a call's input
    if kind is str:  # is hashed several times a cycle, and this ran Python per string and key
        return _string(value)
    if kind is dict:
        return _object(value)
    if kind is list:
        return _array(value)
    if value is None or isinstance(value, bool):
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, int):
        return str(value) if abs(value) <= _EXACT_INT else _number(float(value))
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return _array(value)
    if isinstance(value, dict):
        return _object(value)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


# What json.dumps(s, ensure_ascii=False) gives a string, from C and without its encoder: the
# escapes RFC 8785 asks for.
_string: Callable[[str], str] = json.encoder.encode_basestring


def _object(value: dict[Any, Any]) -> str:
    return "{" + ",".join([_string(k) + ":" + jcs(value[k]) for k in _keys(value)]) + "}"


def _array(value: list[Any] | tuple[Any, ...]) -> str:
    return "[" + ",".join([jcs(v) for v in value]) + "]"


def _keys(value: dict[Any, Any]) -> list[str]:
    """The keys in UTF-16 order: code point order where every key is ASCII (the same)."""
    if all([type(k) is str and k.isascii() for k in value]):
        return sorted(value)
    return sorted(value, key=_utf16)


def _utf16(key: Any) -> bytes:
    if not isinstance(key, str):
        raise TypeError(f"JSON object keys are strings, not {type(key).__name__}")
    return key.encode("utf-16-be", "surrogatepass")


def _number(x: float) -> str:
    """ECMAScript Number::toString of a finite double (RFC 8785 section 3.2.2.3)."""
    if not math.isfinite(x):
        raise ValueError("NaN and infinities are not JSON")
    if x == 0:
        return "0"
    sign, x = ("-", -x) if x < 0 else ("", x)
    mantissa, _, exp = repr(x).partition("e")  # repr: the shortest digits that round-trip
    whole, _, frac = mantissa.partition(".")
    raw = whole + frac
    digits = raw.lstrip("0")
    point = len(whole) + int(exp or 0) - (len(raw) - len(digits))
    return sign + _place(digits.rstrip("0"), point)


def _place(s: str, n: int) -> str:
    """Digits `s` with the decimal point after `n` of them, as ECMAScript writes it."""
    k = len(s)
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + s
    e = n - 1
    exp = f"e{'+' if e >= 0 else '-'}{abs(e)}"
    return (s if k == 1 else s[0] + "." + s[1:]) + exp


def sha256_hex(value: Any) -> str:
    """SHA-256 of the RFC 8785 form: what new decision events record."""
    return hashlib.sha256(jcs(value).encode()).hexdigest()


def sha256_hex_v1(value: Any) -> str:
    """SHA-256 of the format 1 form: what events of chain format 1 recorded."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def wire_time(at: datetime) -> str:
    """A time as the API writes every time: ISO 8601 in UTC with a `Z` (as pydantic does)."""
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")
