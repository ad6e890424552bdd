"""The chat cache lends a committed chat to one command at a time, and forgets in time."""

from __future__ import annotations

from interlock.domain import Chat
from interlock.domain.storage.cache import ChatCache


def committed(tenant: str = "t") -> Chat:
    chat = Chat.start("ops", actor="a", tenant=tenant)
    chat.collect_events()  # as a commit leaves it
    return chat


def test_a_chat_is_lent_to_one_taker_at_a_time() -> None:
    cache, chat = ChatCache(), committed()
    cache.give(chat)
    assert cache.take(chat.id) is chat
    assert cache.take(chat.id) is None  # the second taker loads its own


def test_a_chat_with_unrecorded_events_is_not_kept() -> None:
    cache, chat = ChatCache(), committed()
    chat.send_message("hi", actor="a")
    cache.give(chat)
    assert cache.take(chat.id) is None


def test_entries_expire_and_the_oldest_leave_first() -> None:
    now = [0.0]
    cache = ChatCache(size=2, ttl=30, clock=lambda: now[0])
    first, second, third = committed(), committed(), committed()
    for chat in (first, second, third):
        cache.give(chat)
    assert cache.take(first.id) is None  # pushed out by the third
    now[0] = 31.0
    assert cache.take(second.id) is None  # expired
    cache.give(third)
    assert cache.take(third.id) is third


def test_a_cache_of_size_zero_keeps_nothing() -> None:
    cache, chat = ChatCache(size=0), committed()
    cache.give(chat)
    assert cache.take(chat.id) is None
