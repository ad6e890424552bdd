"""A routing refusal names who may decide in words, never a Python list's repr."""

from __future__ import annotations

from interlock.domain.chat.rules import deciders_in_words


def test_roles_and_groups_in_words() -> None:
    assert deciders_in_words({"treasury"}, set()) == "the role treasury"
    assert deciders_in_words({"b", "a", "c"}, set()) == "one of the roles a, b or c"
    assert deciders_in_words({"treasury"}, {"finance"}) == (
        "the role treasury, or the group finance")
    assert deciders_in_words(set(), {"ops", "cfo"}) == "one of the groups cfo or ops"
    assert deciders_in_words(set(), set()) == "an admin"
