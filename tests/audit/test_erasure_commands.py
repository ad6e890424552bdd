"""A chat whose erasure began takes no command: a server whose chat cache still holds the
chat's plaintext, erased by another process, asks the model nothing and records nothing.

Before, such a server sent the erased history to the model and recorded the turn under the
key it still had cached: `ErasureBegun`, read with the events since its cached copy, did
not stop the command.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain import Decider, Interlock, RespondEntry
from interlock.domain.errors import ChatErasedError
from interlock.domain.runtime.models import ModelRequest
from interlock.domain.runtime.turns import TurnLoop
from interlock.stores.erasure_keys import KeyStore
from tests.audit.test_erasure import SECRET, protected  # noqa: F401 - the fixture
from tests.projections.flows import AGENTS

pytestmark = pytest.mark.anyio


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What every model of the test was asked, as JSON."""
    seen: list[str] = []
    request = TurnLoop._request

    def spy(self: TurnLoop, chat: Any) -> ModelRequest:
        made = request(self, chat)
        seen.append(made.model_dump_json())
        return made

    monkeypatch.setattr(TurnLoop, "_request", spy)
    return seen


async def _pending_chat(app: Interlock) -> tuple[UUID, str]:
    """A chat naming the subject, its transfer waiting for approval: (chat, the interrupt)."""
    chat = app.start_chat("bankingAgent", actor="alice", tenant="bank",
                          metadata={"customer": SECRET})
    result = await app.send(chat.id, f"transfer $5000 to {SECRET}", actor="alice")
    return chat.id, result.interrupts[0].ref


def _erase(store: str, chat_id: UUID) -> None:
    """`interlock audit erase`, another process's act: this one's caches are not told."""
    assert main(["audit", "erase", str(chat_id), "--store", store, "--no-rebuild"]) == 0


async def test_a_server_holding_an_erased_chat_in_its_cache_sends_the_model_nothing(
    protected: Interlock, store: str, asked: list[str],  # noqa: F811
) -> None:
    chat_id, ref = await _pending_chat(protected)
    await protected.resume(chat_id, respond=[RespondEntry(
        ref=ref, name="userApproval", output={"approved": True})], actor="bob")
    assert any(SECRET in request for request in asked)  # the cache holds it in plaintext
    _erase(store, chat_id)
    events, asked[:] = protected.chat_events(chat_id), []
    with pytest.raises(ChatErasedError) as refused:
        await protected.send(chat_id, "and what was my last transfer?", actor="alice")
    assert (refused.value.status, refused.value.code) == (409, "chat_erased")
    assert asked == []  # before: the erased history went to the model
    assert protected.chat_events(chat_id) == events  # and its turn was recorded
    assert protected.chats.take(chat_id) is None  # the refused command gave nothing back


async def test_a_resume_under_its_key_is_not_answered_again_once_erased(
    protected: Interlock, store: str, asked: list[str],  # noqa: F811
) -> None:
    chat_id, ref = await _pending_chat(protected)
    approve = [RespondEntry(ref=ref, name="userApproval",
                            output={"approved": True, "feedback": f"ok for {SECRET}"})]
    first = await protected.resume(chat_id, respond=approve, actor="bob", idempotency_key="k1")
    again = await protected.resume(chat_id, respond=approve, actor="bob", idempotency_key="k1")
    assert (again.finish_reason, again.messages) == (first.finish_reason, first.messages)
    assert SECRET in str(again.messages)  # the first answer again, while the key lives
    _erase(store, chat_id)
    asked[:] = []
    with pytest.raises(ChatErasedError):  # it would hand the erased data back
        await protected.resume(chat_id, respond=approve, actor="bob", idempotency_key="k1")
    assert asked == []


async def test_a_chat_whose_erasure_began_takes_no_message_decision_retry_or_withdrawal(
    protected: Interlock, asked: list[str],  # noqa: F811
) -> None:
    chat_id, ref = await _pending_chat(protected)
    protected.begin_erasure(chat_id, actor="operator")  # its key is still there
    events, asked[:] = protected.chat_events(chat_id), []
    approve = RespondEntry(ref=ref, name="userApproval", output={"approved": True})
    with pytest.raises(ChatErasedError):
        await protected.resume(chat_id, respond=[approve], actor="bob")
    with pytest.raises(ChatErasedError):
        await protected.withdraw(chat_id, [ref], reason=f"not for {SECRET}",
                                 decider=Decider.trusted("admin"))
    with pytest.raises(ChatErasedError):
        await protected.retry(chat_id, actor="alice")
    with pytest.raises(ChatErasedError):
        await protected.send(chat_id, "hello", actor="alice")
    assert asked == [] and protected.chat_events(chat_id) == events


async def test_erase_run_again_after_its_beginning_still_closes_the_pending_calls(
    protected: Interlock, store: str,  # noqa: F811
) -> None:
    chat_id, ref = await _pending_chat(protected)
    protected.begin_erasure(chat_id, actor="interlock:erasure")  # a run cut before the key went
    _erase(store, chat_id)
    reader = build_service(store, AGENTS)
    reader.protect_personal_data(KeyStore.open(reader))
    try:
        chat = reader.get_chat(chat_id)
        assert chat.state.calls[ref].status == "withdrawn" and chat.status == "idle"
        assert SECRET not in chat.state.model_dump_json()
    finally:
        reader.close()
