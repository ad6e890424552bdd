"""Erasure follows fork links, and no fork is made of an erased or erasing chat, even by a
process whose key cache still holds the erased key (issue 40, "A fork undoes an erasure")."""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

import pytest

from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain import Interlock, RestartEntry
from interlock.domain.errors import ChatErasedError, ConflictError
from interlock.stores.erasure_keys import KeyStore
from tests.audit.test_erasure import SECRET, _subject_chat, protected  # noqa: F401 - fixture
from tests.projections.flows import AGENTS

pytestmark = pytest.mark.anyio


def _server(store: str) -> Interlock:
    """Another process's service on the same store, with its own key cache."""
    app = build_service(store, AGENTS)
    app.protect_personal_data(KeyStore.open(app))
    return app


def _holds_plaintext(store: str, *chat_ids: UUID) -> list[bool]:
    """Whether a fresh reader still reads the subject in each chat (its key is there)."""
    reader = _server(store)
    try:
        return [SECRET in reader.get_chat(c).state.model_dump_json() for c in chat_ids]
    finally:
        reader.close()


async def test_erase_follows_forks_and_forks_of_forks(protected: Interlock, store: str,  # noqa: F811
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    chat_id = await _subject_chat(protected)
    fork = protected.fork(chat_id, protected.get_chat(chat_id).version, actor="mallory")
    deeper = protected.fork(fork.id, fork.version, actor="nina")
    assert _holds_plaintext(store, deeper.id) == [True]
    assert main(["audit", "erase", str(chat_id), "--store", store, "--no-rebuild"]) == 0
    out = capsys.readouterr().out
    assert f"chat {fork.id} (a fork of {chat_id}'s history): personal data erased" in out
    assert f"chat {deeper.id} (a fork of {chat_id}'s history): personal data erased" in out
    assert _holds_plaintext(store, chat_id, fork.id, deeper.id) == [False] * 3


async def test_no_fork_is_made_of_an_erasing_or_erased_chat(protected: Interlock,  # noqa: F811
                                                           store: str) -> None:
    erasing, erased = await _subject_chat(protected), await _subject_chat(protected)
    protected.begin_erasure(erasing, actor="operator")  # its key is still there
    with pytest.raises(ChatErasedError) as refused:
        protected.fork(erasing, 2, actor="mallory")
    assert (refused.value.status, refused.value.code) == (409, "chat_erased")
    KeyStore.open(protected).erase(erased)  # as erase did before chats recorded it
    with pytest.raises(ChatErasedError):
        protected.fork(erased, 2, actor="mallory")


async def test_forks_racing_an_erase_hold_no_plaintext_once_it_returns(
        pg_store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    server = _server(pg_store)  # its key cache holds the subject's key throughout
    try:
        chat_id = await _subject_chat(server)
        version = server.get_chat(chat_id).version
        made: list[UUID] = []
        after: list[UUID | Exception] = []  # fork attempts begun once erase returned
        began, returned = threading.Event(), threading.Event()
        beginning = Interlock.begin_erasure

        def begin_erasure(self: Interlock, chat: UUID, **kwargs: Any) -> list[UUID]:
            began.set()  # the racers fork while the erasure records its beginning
            return beginning(self, chat, **kwargs)

        def fork(into: list[UUID | Exception]) -> None:
            try:
                into.append(server.fork(chat_id, version, actor="mallory").id)
            except ConflictError as exc:  # erasing or erased, or lost to the erase
                into.append(exc)

        def race() -> None:
            began.wait()
            during: list[UUID | Exception] = []
            for _ in range(10):
                fork(during)
            made.extend(f for f in during if isinstance(f, UUID))
            returned.wait()
            for _ in range(5):
                fork(after)

        monkeypatch.setattr(Interlock, "begin_erasure", begin_erasure)
        racers = [threading.Thread(target=race) for _ in range(2)]
        for racer in racers:
            racer.start()
        try:
            assert main(["audit", "erase", str(chat_id), "--store", pg_store,
                         "--no-rebuild"]) == 0
        finally:
            began.set()
            returned.set()
            for racer in racers:
                racer.join()
        assert len(after) == 10 and all(isinstance(a, ChatErasedError) for a in after), after
        assert not any(_holds_plaintext(pg_store, *made))
    finally:
        server.close()


async def test_an_erased_fork_whose_copied_calls_were_decided_still_loads(
        protected: Interlock, store: str) -> None:  # noqa: F811
    """Its ChatForked holds nothing once erased, so the later decision on a copied call has
    no call to change: the fork loads (read-only, as every erased chat) and does not stick."""
    chat_id = await _subject_chat(protected)
    fork = protected.fork(chat_id, protected.get_chat(chat_id).version, actor="mallory")
    [held] = fork.pending_interrupts()
    await protected.resume(fork.id, actor="bob", restart=[
        RestartEntry(ref=held.ref, name=held.name, resumed_metadata={"override": True})])
    assert main(["audit", "erase", str(chat_id), "--store", store, "--no-rebuild"]) == 0
    reader = _server(store)
    try:
        erased = reader.get_chat(fork.id)
        assert erased.state.forgotten and list(erased.state.calls) == []
        assert SECRET not in erased.state.model_dump_json()
    finally:
        reader.close()
