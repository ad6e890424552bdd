"""Small statistics shared by the views."""

from __future__ import annotations

from collections.abc import Sequence


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """Continuous percentile with linear interpolation (as PostgreSQL's percentile_cont)."""
    if not ordered:
        return None
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
