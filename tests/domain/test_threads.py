"""A reserved thread (domain/threads.py): an id the server made for a tenant, whose chat its
first run begins with the agent it names; another tenant can neither see nor claim it."""

from __future__ import annotations

from uuid import uuid4

import pytest

from interlock import Agent, FunctionModel
from interlock.bootstrap import build_service
from interlock.domain.errors import ChatNotFoundError
from interlock.domain.threads import ThreadReserved, reservation_id
from tests.kit import say

AGENTS = [Agent(name=n, system="s", tools=[], model=FunctionModel(lambda req: say("hi"), name=n))
          for n in ("first", "second")]


def test_a_reserved_thread_becomes_a_chat_with_the_agent_of_its_first_run(
        any_store: str) -> None:
    app = build_service(any_store, AGENTS)
    try:
        reserved = app.threads.reserve(actor="dana", tenant="acme")
        tid = reserved.thread_id
        [event] = app.events.get(reservation_id(tid))
        assert isinstance(event, ThreadReserved) and (event.tenant, event.actor) == ("acme",
                                                                                      "dana")
        with pytest.raises(ChatNotFoundError):
            app.get_chat(tid, tenant="acme")  # reserved: no chat, so no chat without an agent
        assert app.threads.get(tid, tenant="globex") is None
        with pytest.raises(ChatNotFoundError):
            app.threads.start_chat(tid, "first", actor="eve", tenant="globex")

        chat = app.threads.start_chat(tid, "first", actor="alice", tenant="acme")
        assert (chat.id, chat.state.agent, chat.state.started_by) == (tid, "first", "alice")
        again = app.threads.start_chat(tid, "second", actor="bob", tenant="acme")
        assert (again.id, again.state.agent, again.version) == (tid, "first", chat.version)
        with pytest.raises(ChatNotFoundError):
            app.threads.start_chat(uuid4(), "first", actor="alice", tenant="acme")
    finally:
        app.close()
