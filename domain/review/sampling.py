"""Seeded, stratified samples: the same seed over the same population draws the same items.

A candidate's key is `chat_id#version`. Within a stratum the lowest ranks are drawn: a
simple random sample for a seed nobody could aim, the order does not depend on how the
population was read, anyone with the seed and the keys draws it again, and a store ranks
in SQL the same way (the view's `sample`: only the drawn rows leave the database). Strata
get seats in proportion to their size (largest remainders, at least one each when there
are seats enough). A review records the method that ranked its sample:

- `sha256-v1`: SHA-256("seed\nkey"), bytes compared as bytes. One SHA-256 per candidate
  per draw (2.8 s for 1,000,000 on PostgreSQL).
- `mix64-v2` (new reviews): the key's 64-bit word `key_word` (the first 8 bytes of
  SHA-256(key), signed big-endian; the view stores it per row at insert) and the seed's
  (`seed_word`, the same of SHA-256(seed)) are mixed by `lookup3`, PostgreSQL's
  `hashint4extended`: rank = lookup3(low half, lookup3(high half, seed word)), ties broken
  by chat_id (as bytes), then version. Two integer hashes per candidate: a store ranks a
  million in a fraction of a second. The seed still passes through SHA-256, so no seed can
  be chosen for a word; lookup3 is no cryptographic function, but what a decider controls
  (the key) passes through SHA-256 too, and the seed word is unknown until the draw.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from interlock.domain.errors import InvalidRequestError

STRATA = ("agent", "tool", "actor", "kind")
MAX_SIZE = 10_000
Method = Literal["sha256-v1", "mix64-v2"]
METHODS: tuple[Method, ...] = ("sha256-v1", "mix64-v2")
METHOD: Method = "mix64-v2"  # what new reviews are drawn by
_M32 = 0xFFFFFFFF


@dataclass(frozen=True)
class Candidate:
    """A decision the query chose: its place and the values it is stratified by."""

    chat_id: str
    version: int
    ref: str
    kind: str = ""
    actor: str = ""
    strata: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.chat_id}#{self.version}"


def rank(seed: str, key: str) -> bytes:
    """sha256-v1's rank: lower is drawn first."""
    return hashlib.sha256(f"{seed}\n{key}".encode()).digest()


def key_word(key: str) -> int:
    """A key's 64-bit word (signed): the view stores it per row, so a draw hashes no text."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


def seed_word(seed: str) -> int:
    """The seed's 64-bit word (signed)."""
    return key_word(seed)


def mix64(word: int, seed: int) -> int:
    """mix64-v2's rank of a key word: lookup3 of its low half keyed by lookup3 of its high."""
    return lookup3(word & _M32, lookup3((word >> 32) & _M32, seed))


def lookup3(k: int, seed: int) -> int:
    """PostgreSQL's hash_uint32_extended (`hashint4extended`): Jenkins' lookup3, signed."""
    a = b = c = (0x9E3779B9 + 4 + 3923095) & _M32
    seed &= (1 << 64) - 1
    if seed:
        a, b, c = _mix((a + (seed >> 32)) & _M32, (b + seed) & _M32, c)
    a, b, c = _final((a + k) & _M32, b, c)
    value = b << 32 | c
    return value - (1 << 64) if value >= 1 << 63 else value


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M32


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    for shift in ((4, 6, 8), (16, 19, 4)):
        a = ((a - c) & _M32) ^ _rot(c, shift[0])
        c = (c + b) & _M32
        b = ((b - a) & _M32) ^ _rot(a, shift[1])
        a = (a + c) & _M32
        c = ((c - b) & _M32) ^ _rot(b, shift[2])
        b = (b + a) & _M32
    return a, b, c


def _final(a: int, b: int, c: int) -> tuple[int, int, int]:
    c = ((c ^ b) - _rot(b, 14)) & _M32
    a = ((a ^ c) - _rot(c, 11)) & _M32
    b = ((b ^ a) - _rot(a, 25)) & _M32
    c = ((c ^ b) - _rot(b, 16)) & _M32
    a = ((a ^ c) - _rot(c, 4)) & _M32
    b = ((b ^ a) - _rot(a, 14)) & _M32
    c = ((c ^ b) - _rot(b, 24)) & _M32
    return a, b, c


def check_spec(size: int, strata: Sequence[str]) -> None:
    if not 0 <= size <= MAX_SIZE:
        raise InvalidRequestError(f"a sample holds 0 to {MAX_SIZE} items", size=size)
    unknown = [s for s in strata if s not in STRATA]
    if unknown or len(set(strata)) < len(strata):
        raise InvalidRequestError(f"strata are distinct names among {', '.join(STRATA)}",
                                  strata=list(strata))


def new_seed() -> str:
    """A seed for a sample nobody chose one for (recorded with it)."""
    return secrets.token_hex(8)


def check_seed(seed: str) -> None:
    if not 1 <= len(seed) <= 200:
        raise InvalidRequestError("a seed holds 1 to 200 characters")


def stratum_name(values: Sequence[str]) -> str:
    return "|".join(values)


def draw(population: Sequence[Candidate], size: int, seed: str,
         method: Method = "sha256-v1") -> list[Candidate]:
    """`size` candidates (all of them if fewer), in rank order within each stratum."""
    groups: dict[tuple[str, ...], list[Candidate]] = {}
    for c in population:
        groups.setdefault(c.strata, []).append(c)
    seats = allot({k: len(v) for k, v in groups.items()}, min(size, len(population)))
    drawn: list[Candidate] = []
    for stratum in sorted(groups):
        ranked = sorted(groups[stratum], key=ranking(seed, method))
        drawn += ranked[:seats[stratum]]
    return drawn


def ranking(seed: str, method: Method) -> Callable[[Candidate], Any]:
    """A sort key: candidates in `method`'s rank order for `seed`."""
    if method == "mix64-v2":
        word = seed_word(seed)
        return lambda c: (mix64(key_word(c.key), word), c.chat_id, c.version)
    return lambda c: rank(seed, c.key)


def check_method(method: str) -> Method:
    if method not in METHODS:
        raise InvalidRequestError(f"a sampling method is one of {', '.join(METHODS)}",
                                  method=method)
    return method


def allot(sizes: dict[tuple[str, ...], int], total: int) -> dict[tuple[str, ...], int]:
    """Seats per stratum: proportional, largest remainder, one each first if possible."""
    n = sum(sizes.values())
    if total == 0 or n == 0:
        return dict.fromkeys(sizes, 0)
    floor = 1 if total >= len(sizes) else 0
    seats = dict.fromkeys(sizes, floor)
    left = total - floor * len(sizes)
    shares = {k: left * v / n for k, v in sizes.items()}
    for k in seats:
        seats[k] = min(sizes[k], seats[k] + int(shares[k]))
    order = sorted(sizes, key=lambda k: (-(shares[k] - int(shares[k])), k))
    while sum(seats.values()) < total:
        for k in order:
            if sum(seats.values()) < total and seats[k] < sizes[k]:
                seats[k] += 1
    return seats
