"""The views' values as PostgreSQL reads them: JSON as json.dumps writes it, times as
isoformat does, however many pass through the memo of formatted times."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from psycopg.types.json import Json

from interlock.projections.backends import postgres
from interlock.projections.backends.postgres import _encoded, _json_text

VALUES: list[Any] = [None, 0, -1.5, True, "plain", "é\u2028\ud800", 10**30, float("nan"),
                     {"a": [1, {"b": None}], "ü": ["x", 2.5]}, [], {}, {1: "int key"}]


@pytest.mark.parametrize("value", VALUES)
def test_json_is_written_as_json_dumps_writes_it(value: Any) -> None:
    assert _json_text(value) == json.dumps(value)
    [text], _ = _encoded([Json(value)], "utf-8", None)  # type: ignore[arg-type]
    assert text == json.dumps(value).encode()


def test_what_json_dumps_refuses_is_refused_alike() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular"):
        _json_text(cycle)
    with pytest.raises(TypeError, match="not JSON serializable"):
        _json_text({"a": object()})
    assert _json_text({"after": "a refusal"}) == '{"after": "a refusal"}'


def test_times_are_written_as_isoformat_past_the_memo() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    times = [start + timedelta(microseconds=7 * i) for i in range(3000)]
    times.append(datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))))  # same instant
    for when in times + times:
        [text], _ = _encoded([when], "utf-8", None)  # type: ignore[arg-type]
        assert text == when.isoformat().encode()
    assert len(postgres._TIMES) <= 1024
