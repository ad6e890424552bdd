"""Seeded, stratified samples: the same seed over the same population draws the same items.

A candidate's key is `chat_id#version` and its rank SHA-256("seed\nkey") (bytes compared
as bytes). Within a stratum the lowest ranks are drawn: a simple random sample for a seed
nobody could aim, the order does not depend on how the population was read, anyone with
the seed and the keys draws it again, and a store ranks in SQL the same way (the view's
`sample`: only the drawn rows leave the database). Strata get seats in proportion to
their size (largest remainders, at least one each when there are seats enough).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from interlock.domain.errors import InvalidRequestError

STRATA = ("agent", "tool", "actor", "kind")
MAX_SIZE = 10_000


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
    """Lower is drawn first."""
    return hashlib.sha256(f"{seed}\n{key}".encode()).digest()


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


def draw(population: Sequence[Candidate], size: int, seed: str) -> list[Candidate]:
    """`size` candidates (all of them if fewer), in rank order within each stratum."""
    groups: dict[tuple[str, ...], list[Candidate]] = {}
    for c in population:
        groups.setdefault(c.strata, []).append(c)
    seats = allot({k: len(v) for k, v in groups.items()}, min(size, len(population)))
    drawn: list[Candidate] = []
    for stratum in sorted(groups):
        ranked = sorted(groups[stratum], key=lambda c: rank(seed, c.key))
        drawn += ranked[:seats[stratum]]
    return drawn


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
