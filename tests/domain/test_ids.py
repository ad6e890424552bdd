"""A chat id's remembered text is its `str`, however many ids pass through."""

from uuid import UUID, uuid4

from interlock.domain.chat import ids
from interlock.domain.chat.ids import id_text


def test_the_text_is_str_of_the_id_and_stays_so_past_the_memory() -> None:
    chats = [uuid4() for _ in range(ids._KEPT + 10)]
    for chat in chats:  # the memory fills, starts again, and is read back
        assert id_text(chat) == str(chat)
    assert len(ids._TEXT) <= ids._KEPT
    assert [id_text(chat) for chat in chats] == [str(chat) for chat in chats]


def test_ids_equal_as_uuids_share_their_text_and_text_passes_through() -> None:
    chat = uuid4()
    assert id_text(UUID(str(chat))) == str(chat)
    assert id_text(UUID(int=0)) == "00000000-0000-0000-0000-000000000000"
    assert id_text("not-a-uuid") == "not-a-uuid"
