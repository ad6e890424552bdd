"""A chat whose erasure began takes no command: a server whose chat cache still holds the
chat's plaintext, erased by another process, asks the model nothing and records nothing.

Before, such a server sent the erased history to the model and recorded the turn under the
key it still had cached: `ErasureBegun`, read with the events since its cached copy, did
not stop the command.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import httpx
import pytest

from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.cli.main import main
from interlock.domain import (
    Agent,
    Decider,
    FunctionModel,
    Interlock,
    Message,
    ModelResponse,
    Part,
    RespondEntry,
    ToolContext,
    ToolRequest,
    agent_tool,
    tool,
)
from interlock.domain.errors import ChatErasedError, ConcurrencyError
from interlock.domain.runtime.models import ModelRequest
from interlock.domain.runtime.turns import TurnLoop
from interlock.projections import open_read_models
from interlock.projections.views.chats import ChatFilter
from interlock.stores.erasure_keys import KeyStore
from tests.api.conftest import KEYS
from tests.api.server import ThreadServer
from tests.audit.test_erasure import SECRET, protected  # noqa: F401 - the fixture
from tests.kit import Script, call, say
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


@pytest.mark.parametrize("erased", ["begun", "done"])
async def test_a_start_under_its_key_is_not_answered_again_once_erasure_begins(
    protected: Interlock, store: str, asked: list[str], erased: str,  # noqa: F811
) -> None:
    text, metadata = f"transfer $5000 to {SECRET}", {"customer": SECRET}
    chat = await protected.open_chat("bankingAgent", text, actor="alice", tenant="bank",
                                     metadata=metadata, idempotency_key="k1")
    again = await protected.open_chat("bankingAgent", text, actor="alice", tenant="bank",
                                      metadata=metadata, idempotency_key="k1")
    assert again.id == chat.id and SECRET in again.state.model_dump_json()
    if erased == "begun":
        protected.begin_erasure(chat.id, actor="operator")  # its key is still there
    else:
        _erase(store, chat.id)
    events, asked[:] = protected.chat_events(chat.id), []
    with pytest.raises(ChatErasedError):  # its first answer is the erased data
        await protected.open_chat("bankingAgent", text, actor="alice", tenant="bank",
                                  metadata=metadata, idempotency_key="k1")
    assert asked == [] and protected.chat_events(chat.id) == events


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


@pytest.fixture
def alice(protected: Interlock) -> Iterator[httpx.Client]:  # noqa: F811
    """The protected service served over HTTP, as alice."""
    views = open_read_models(protected)
    server = ThreadServer(make_app(protected, views, AuthConfig.from_mapping(KEYS)))
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer key-alice"},
                          timeout=30) as client:
            yield client
    finally:
        server.stop()
        views.close()


def test_a_reconnected_stream_hands_back_nothing_of_an_erased_chat(
    alice: httpx.Client, store: str,
) -> None:
    chat_id = alice.post("/v1/chats", json={"agent": "bankingAgent"}).json()["id"]
    path, body = f"/v1/chats/{chat_id}/messages", {"text": f"transfer $5000 to {SECRET}"}
    stream = {"Accept": "text/event-stream"}
    with alice.stream("POST", path, json=body, headers=stream) as first:
        frames = first.read().decode()
    assert SECRET in frames  # the server keeps the stream's frames for reconnects
    first_id = next(line[4:] for line in frames.splitlines() if line.startswith("id: "))
    _erase(store, UUID(chat_id))
    again = alice.post(path, json=body, headers={**stream, "Last-Event-ID": first_id})
    assert (again.status_code, again.json()["error"]["code"]) == (409, "chat_erased")
    assert SECRET not in again.text


ERASE: list[Any] = []  # what the lookup tool does when it runs: the erase, once


@tool(name="lookup", description="Look something up (it writes nothing).", side_effects=False)
async def lookup(input: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    while ERASE:
        ERASE.pop()()
    return {"found": "nothing"}


def _look_script(request: Any) -> ModelResponse:
    """Looks it up when asked to, then says so; notes anything else."""
    last = request.messages[-1]
    if last.role == "user" and "look" in (last.text or ""):
        call = Part(tool_request=ToolRequest(name="lookup", input={}))
        return ModelResponse(message=Message(role="model", content=[call]))
    return ModelResponse(message=Message(role="model", content=[Part(text="noted")]))


LOOK = Agent(name="lookAgent", system="Look things up.", tools=[lookup],
             model=FunctionModel(_look_script, name="look-script"))


async def test_a_turn_running_when_the_erasure_lands_asks_the_model_nothing_more(
    store: str, asked: list[str],
) -> None:
    app = build_service(store, [LOOK])
    app.protect_personal_data(KeyStore.open(app))
    try:
        chat = app.start_chat("lookAgent", actor="alice", tenant="bank")
        await app.send(chat.id, f"my name is {SECRET}", actor="alice")
        ERASE.append(lambda: _erase(store, chat.id))  # while its read-only tool runs
        asked[:] = []
        with pytest.raises(ConcurrencyError):  # the chat moved on: this turn records nothing
            await app.send(chat.id, "please look it up", actor="alice")
        assert not ERASE and len(asked) == 1  # before: asked again, the history and all
    finally:
        app.close()


async def test_erase_follows_the_sub_agent_chats_a_chat_started(
    store: str, capsys: pytest.CaptureFixture[str],
) -> None:
    lead = Script([call(("helper", {"message": f"find the account of {SECRET}"}, "h1")),
                   say("lead done")])
    agents = [Agent(name="lead", system="", model=FunctionModel(lead),
                    tools=[agent_tool("helper", "Ask the helper")]),
              Agent(name="helper", system="", model=FunctionModel(Script([say("found")])),
                    tools=[])]
    app = build_service(store, agents)
    app.protect_personal_data(KeyStore.open(app))
    views = open_read_models(app)
    try:
        parent = app.start_chat("lead", actor="alice", tenant="bank")
        done = await app.send(parent.id, "go", actor="alice")
        views.wait(done.position)
        [child] = [UUID(str(c.chat_id)) for c in views.chats(ChatFilter(agent="helper")).items]
        assert SECRET in app.get_chat(child).state.model_dump_json()  # the parent's data
        _erase(store, parent.id)
        assert f"chat {child} (a sub-agent chat of {parent.id}'s): personal data erased" in (
            capsys.readouterr().out)
        reader = build_service(store, agents)
        reader.protect_personal_data(KeyStore.open(reader))
        try:
            assert SECRET not in reader.get_chat(child).state.model_dump_json()
            with pytest.raises(ChatErasedError):
                await reader.send(child, "and again?", actor="alice")
        finally:
            reader.close()
    finally:
        views.close()
        app.close()
