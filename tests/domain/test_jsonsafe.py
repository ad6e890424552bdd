"""What may be recorded as JSON: the C encoder's fast answer never accepts what the walk
refuses, and the walk still names the problem."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.domain.chat.jsonsafe import MAX_DEPTH, UnsafeJsonError, _problem, check_json


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


cycle: list[Any] = []
cycle.append(cycle)

REFUSED = [
    (float("nan"), "NaN"), ({"a": [1, float("inf")]}, "NaN"), ({float("nan"): 1}, "NaN"),
    ({"a": "x\ud800"}, "surrogate"), ({"\udfff": 1}, "surrogate"),
    (_nested(MAX_DEPTH + 1), "deeper"), (cycle, "deeper"),
]
ACCEPTED = [
    None, 1, 2.5, True, "text", {"role": "model", "content": [{"text": "hi"}]},
    _nested(MAX_DEPTH), {"a": "[" * 500}, (1, "two"), {1: "int key"}, {"obj": object()},
    {"set": {1, 2}},
]


@pytest.mark.parametrize(("value", "named"), REFUSED)
def test_what_cannot_be_recorded_is_refused_and_named(value: Any, named: str) -> None:
    with pytest.raises(UnsafeJsonError, match=named):
        check_json(value, "the output")


@pytest.mark.parametrize("value", ACCEPTED)
def test_what_the_walk_accepts_is_accepted(value: Any) -> None:
    assert _problem(value, 0) is None
    check_json(value, "the output")
