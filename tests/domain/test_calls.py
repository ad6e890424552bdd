"""A chat's calls as a snapshot hands them over: the settled ones stay JSON until read."""

from __future__ import annotations

from datetime import UTC, datetime

from interlock.domain.chat.state import Calls, ChatState, ToolCall

AT = datetime(2026, 12, 1, tzinfo=UTC)


def call(ref: str, turn: int, status: str = "completed") -> ToolCall:
    return ToolCall.model_validate({"ref": ref, "name": "transfer", "input": {"n": ref},
                                    "turn": turn, "requested_at": AT, "status": status})


CALLS = {c.ref: c for c in [call("a", 1), call("b", 1), call("c", 2), call("d", 3, "interrupted")]}


def reloaded(calls: Calls, turn: int) -> Calls:
    """The calls as a snapshot at `turn` stores them and a load gets them back."""
    refs, held, live = calls.split_json(turn)
    return Calls.from_json(refs, held, turn, live)


def test_the_calls_of_earlier_turns_are_held_and_the_current_ones_decoded() -> None:
    calls = reloaded(Calls(CALLS), 3)
    assert not calls.decoded and len(calls) == 4 and list(calls) == ["a", "b", "c", "d"]
    assert "a" in calls and "z" not in calls and calls.get("z") is None
    assert calls["d"] == CALLS["d"] and calls.of_turn(3) == [CALLS["d"]]
    calls["e"] = call("e", 3)  # a new request of the current turn
    assert not calls.decoded and list(calls) == ["a", "b", "c", "d", "e"]


def test_reading_or_changing_a_held_call_decodes_them_all_in_order() -> None:
    for touch in (lambda c: c["b"], lambda c: c.values(), lambda c: c.of_turn(1),
                  lambda c: c.__setitem__("a", call("a", 1, "failed"))):
        calls = reloaded(Calls(CALLS), 3)
        touch(calls)
        assert calls.decoded and list(calls) == ["a", "b", "c", "d"]
    assert calls["a"].status == "failed" and calls != Calls(CALLS)
    assert reloaded(Calls(CALLS), 3) == CALLS == Calls(CALLS)


def test_a_snapshot_of_held_calls_writes_them_as_they_were_read() -> None:
    first = reloaded(Calls(CALLS), 2)  # a, b held
    first["e"] = call("e", 4)
    again = reloaded(first, 4)  # a, b still held: their JSON is reused, c and d join them
    assert list(again) == ["a", "b", "c", "d", "e"] and again.of_turn(4) == [call("e", 4)]
    assert not again.decoded and again == {**CALLS, "e": call("e", 4)}
    assert reloaded(Calls(), 5) == {} and reloaded(Calls(CALLS), 0).decoded


def test_it_validates_from_a_dict_and_serialises_as_one() -> None:
    state = ChatState.model_validate({
        "agent": "a", "tenant": "t", "started_by": "u", "created_at": AT, "updated_at": AT,
        "calls": {ref: c.model_dump() for ref, c in CALLS.items()}})
    assert isinstance(state.calls, Calls) and state.calls == CALLS
    held = state.model_copy(update={"calls": reloaded(state.calls, 3)})
    assert held.model_dump()["calls"] == {ref: c.model_dump() for ref, c in CALLS.items()}
