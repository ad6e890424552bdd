"""Comparing the events a replay recorded with the recorded ones, and naming the difference.

Events compare without what belongs to the run (ids, versions, times, the chain); held
calls' deadlines compare as offsets from their event. Tool inputs are left out of the
comparison of a step (`masked`): where an input matters, a stand-in judges it (a tool run
with an input never recorded, a decision on another input); a chat's last comparison
(`unmasked`) still names an input that differs and was never used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interlock.domain.chat import approval_events as ae
from interlock.domain.chat import events as ev
from interlock.replay.differences import Difference, Kind
from interlock.replay.recording import UNCOMPARED

# The run's, not the agent's: ids, versions, times, the chain, a provider's token counts,
# the fingerprint of the agent (AgentFingerprinted events are not compared either).
_RUN_FIELDS = {"originator_id", "originator_version", "timestamp", "chain", "usage",
               "fingerprint"}  # a message's record of the agent that ran its turn
# A vote recorded before a reason was required replays with this one, compared as none.
UNSAID = "(no reason recorded)"
# A reply that carries its requests (old logs) compares as the ToolRequested events it
# stands for (`compared`), as a reply followed by its ToolRequested events does.
_CARRIED = {"requests"}


def shown(event: ev.ChatEvent, masked: bool = False) -> dict[str, Any]:
    """The event as compared (and as the report shows it)."""
    data = event.model_dump(mode="json", exclude=_RUN_FIELDS | _CARRIED)
    data = {"type": type(event).__name__, **data}
    if isinstance(event, ae.ApprovalRequested):
        _relative(data["terms"], event)
    if isinstance(event, ae.ApprovalVoted) and event.reason == UNSAID:
        data["reason"] = None
    if isinstance(event, ae.InterruptExpired):
        data["expires_at"] = "(its terms' deadline)"  # compared there, as an offset
    if masked:
        _mask(data)
    return data


def _relative(terms: dict[str, Any], event: ae.ApprovalRequested) -> None:
    for name in ("expires_at", "escalate_at"):
        at = getattr(event.terms, name)
        terms[name] = None if at is None else round((at - event.timestamp).total_seconds())


def _mask(data: dict[str, Any]) -> None:
    if data["type"] == "ToolRequested":
        data["input"] = "(compared where used)"
    elif data["type"] == "ApprovalRequested":
        data["input_sha256"] = "(compared where used)"
    elif data["type"] == "ModelResponded":
        for part in data["message"]["content"]:
            request = part.get("tool_request")
            if request is not None:
                request["input"] = "(compared where used)"


def compared(events: Sequence[ev.ChatEvent]) -> list[ev.ChatEvent]:
    """The events that compare, a reply that carries its requests (old logs) followed by
    the ToolRequested events it stands for, so recordings of either form compare alike."""
    return [e for e in ev.requested_calls(events)
            if not isinstance(e, (*UNCOMPARED, ev.ChatStarted))]


def first_difference(expected: Sequence[ev.ChatEvent], actual: Sequence[ev.ChatEvent],
                     *, masked: bool) -> Difference | None:
    """The first recorded event the replay did not record alike, by kind; None if alike."""
    want, got = compared(expected), compared(actual)
    for n in range(max(len(want), len(got))):
        w = shown(want[n], masked) if n < len(want) else None
        g = shown(got[n], masked) if n < len(got) else None
        if w != g:
            version = want[n].originator_version if n < len(want) else (
                want[-1].originator_version + 1 if want else 0)
            kind = classify(w, g)
            return Difference(kind=kind, version=version,
                              event=(w or g or {}).get("type", ""),
                              expected=shown(want[n]) if w else None,
                              actual=shown(got[n]) if g else None,
                              detail=_detail(kind, w, g))
    return None


def classify(expected: dict[str, Any] | None, actual: dict[str, Any] | None) -> Kind:
    types = {d["type"] for d in (expected, actual) if d is not None}
    if "ApprovalRequested" in types:
        return "policy_changed"
    if "ToolRequested" in types:
        return "tool_call_changed"
    if types == {"ModelResponded"}:
        assert expected is not None and actual is not None
        return "tool_call_changed" if _requests(expected) != _requests(actual) else (
            "answer_changed")
    return "outcome_changed"


def _requests(data: dict[str, Any]) -> list[Any]:
    return [p.get("tool_request") for p in data["message"]["content"] if p.get("tool_request")]


def _detail(kind: Kind, expected: dict[str, Any] | None, actual: dict[str, Any] | None) -> str:
    if kind != "policy_changed":
        return ""
    if expected is None or expected["type"] != "ApprovalRequested":
        return "the new policies hold a call that ran unheld"
    if actual is None or actual["type"] != "ApprovalRequested":
        return "the new policies no longer hold this call"
    changed = sorted(k for k, v in expected["terms"].items() if actual["terms"].get(k) != v)
    return "the new policies hold it on other terms: " + ", ".join(changed)
