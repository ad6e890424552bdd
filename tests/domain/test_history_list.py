"""A chat's messages as a snapshot hands them over: read lazily, written incrementally."""

from __future__ import annotations

from interlock.domain.chat.history_list import Messages
from interlock.domain.chat.messages import Message, text_message
from interlock.domain.chat.state import ChatState

SOME = [text_message("user" if i % 2 else "model", f"message {i}") for i in range(6)]


def held(count: int) -> Messages:
    return Messages.from_json(Messages(SOME[:count]).to_json(), count)


def test_what_a_command_reads_of_a_held_history_leaves_it_undecoded() -> None:
    messages = held(4)
    messages.append(SOME[4])
    assert len(messages) == 5 and bool(messages)
    assert messages[-1] == SOME[4] and messages[4] == SOME[4]
    assert messages[4:] == [SOME[4]]
    assert not messages.decoded
    assert messages[4:2] == [] and messages[4:-4] == SOME[:5][4:-4] == []


def test_reading_an_old_message_decodes_them_all_in_order() -> None:
    messages = held(4)
    messages.append(SOME[4])
    assert messages[0] == SOME[0]
    assert messages.decoded and list(messages) == SOME[:5] and messages == SOME[:5]
    assert messages[1:3] == SOME[1:3] and messages[-2] == SOME[3]


def test_its_json_is_the_json_of_all_its_messages_however_it_was_built() -> None:
    whole = Messages(SOME).to_json()
    lazy = held(3)
    lazy.append(SOME[3])
    assert Messages.from_json(lazy.to_json(), 4) == SOME[:4]  # written before decoding
    lazy.append(SOME[4])
    assert lazy[0] == SOME[0]  # decoded now: what was written is kept, the rest added
    lazy.append(SOME[5])
    assert lazy.to_json() == whole
    grown = Messages()
    for message in SOME:
        grown.append(message)
        assert Messages.from_json(grown.to_json(), len(grown)) == SOME[:len(grown)]


def test_it_validates_from_a_list_and_serialises_as_one() -> None:
    state = ChatState.model_validate({
        "agent": "a", "tenant": "t", "started_by": "u", "created_at": "2026-12-01T00:00:00Z",
        "updated_at": "2026-12-01T00:00:00Z", "messages": [m.model_dump() for m in SOME]})
    assert isinstance(state.messages, Messages) and state.messages == SOME
    assert [Message.model_validate(m) for m in state.model_dump()["messages"]] == SOME
