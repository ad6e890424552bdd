"""What a replay reports: the first difference of a chat, by kind."""

from __future__ import annotations

import difflib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Kind = Literal[
    "prompt_drift",  # the model would be sent another request than the one recorded
    "tool_call_changed",  # a tool would run with a tool or input never recorded
    "approval_no_longer_applies",  # a recorded decision was on another input (or no call)
    "policy_changed",  # held where it was not (or not where it was), other roles or quorum
    "answer_changed",  # --live-model: the model answered otherwise (same tools)
    "outcome_changed",  # any other event differs (a tool's outcome, how a turn ended)
    "not_replayable",  # the chat cannot be replayed (no such agent, an erased chat...)
]
KINDS: tuple[Kind, ...] = (
    "prompt_drift", "tool_call_changed", "approval_no_longer_applies", "policy_changed",
    "answer_changed", "outcome_changed", "not_replayable",
)
DIFF_LINES = 80


class Difference(BaseModel):
    """The first event of a chat that the new version records otherwise."""

    model_config = ConfigDict(frozen=True)

    kind: Kind
    version: int  # the recorded event's version (where the chat departs)
    event: str  # the recorded event's type, or the step's
    expected: Any = None
    actual: Any = None
    detail: str = ""
    diff: str | None = None


def readable_diff(expected: Any, actual: Any, what: str = "request") -> str:
    """A unified diff of two JSON values, one key per line, at most DIFF_LINES lines."""
    lines = list(difflib.unified_diff(
        _lines(expected), _lines(actual), f"recorded {what}", f"new {what}", lineterm="", n=2))
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more lines"]
    return "\n".join(lines)


def _lines(value: Any) -> list[str]:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
