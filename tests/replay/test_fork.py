"""Fork: a new chat holding a chat's history up to a version, linked both ways."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import httpx
import pytest

from interlock.domain import ApproveEntry, Interlock, RespondEntry
from interlock.domain.chat.fork_events import ChatForked, ChatForkedTo
from interlock.domain.errors import ChatNotFoundError, InvalidRequestError, UnknownAgentError
from interlock.examples.banking import AGENTS
from interlock.projections import open_read_models
from interlock.projections.interface import ChatFilter, InboxFilter
from interlock.projections.views.inbox import InboxView
from interlock.replay import ReplayOptions, replay_recorded
from tests.api.conftest import Live, client_for, live  # noqa: F401 - fixtures
from tests.replay.corpus import served


@pytest.fixture
def app(store: str) -> Iterator[Interlock]:
    service = served(store)
    try:
        yield service
    finally:
        service.close()


def _asked(app: Interlock) -> tuple[object, int]:
    """A chat whose userApproval was answered after version `n` (then it went on)."""
    chat = app.start_chat("bankingAgent", actor="alice", tenant="acme")
    sent = asyncio.run(app.send(chat.id, "Transfer $2500 to savings.", actor="alice"))
    [ask] = sent.interrupts
    asked_at = app.get_chat(chat.id).version
    asyncio.run(app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})]))
    return chat.id, asked_at


def test_a_fork_holds_the_history_with_its_pending_interrupts_and_links_both_ways(
        app: Interlock) -> None:
    chat_id, n = _asked(app)
    fork = app.fork(chat_id, n, actor="dana", tenant="acme")
    then, source = app.get_chat(chat_id, version=n), app.get_chat(chat_id)
    loaded = app.get_chat(fork.id, tenant="acme")
    assert loaded.state.tenant == "acme" and loaded.state.agent == "bankingAgent"
    assert [m.wire() for m in loaded.state.messages] == [m.wire() for m in then.state.messages]
    assert [c.ref for c in loaded.pending_interrupts()] == ["userApproval-1"]
    assert loaded.status == "interrupted"
    assert source.state.calls["userApproval-1"].status == "responded"  # decided after n: not
    _, forked = app.chat_events(fork.id)
    _, stored = app.recorder.select_events(fork.id)
    assert b"Transfer $2500" not in stored.state  # the copy is encrypted under the fork's key
    assert isinstance(forked, ChatForked)
    assert (forked.source_id, forked.source_version, forked.actor) == (chat_id, n, "dana")
    link = app.chat_events(chat_id)[-1]
    assert isinstance(link, ChatForkedTo) and (link.fork_id, link.version) == (fork.id, n)
    assert forked.chain and link.chain  # sealed in both chains
    answered = asyncio.run(app.resume(fork.id, actor="bob", respond=[RespondEntry(
        ref="userApproval-1", name="userApproval", output={"approved": False})]))
    assert answered.finish_reason == "stop" and "cancelled" in answered.text


def test_a_fork_goes_on_under_a_named_agent(app: Interlock) -> None:
    chat_id, n = _asked(app)
    assert app.fork(chat_id, n, actor="dana", agent="treasuryBankingAgent").state.agent == (
        "treasuryBankingAgent")
    with pytest.raises(UnknownAgentError):
        app.fork(chat_id, n, actor="dana", agent="nobody")


def test_a_fork_out_of_range_mid_turn_or_of_another_tenant_is_refused(app: Interlock) -> None:
    chat_id, n = _asked(app)
    last = app.get_chat(chat_id).version
    with pytest.raises(InvalidRequestError, match=f"there is no version {last + 1}"):
        app.fork(chat_id, last + 1, actor="dana")
    with pytest.raises(InvalidRequestError, match="there is no version 0"):
        app.fork(chat_id, 0, actor="dana")
    with pytest.raises(InvalidRequestError, match="mid-turn at version 2"):
        app.fork(chat_id, 2, actor="dana")
    with pytest.raises(ChatNotFoundError):
        app.fork(chat_id, n, actor="eve", tenant="globex")
    with pytest.raises(ChatNotFoundError):
        app.fork(uuid4(), 1, actor="dana")
    assert app.get_chat(chat_id).version == last  # nothing was written


def test_the_fork_is_listed_like_any_chat_and_is_not_replayed_as_its_source(
        app: Interlock) -> None:
    views = open_read_models(app)
    try:
        chat_id, n = _asked(app)
        fork = app.fork(chat_id, n, actor="dana", tenant="acme")
        views.catch_up()
        rows = {r.chat_id: r for r in views.chats(ChatFilter(tenant="acme"), 10, None).items}
        assert (rows[str(fork.id)].status, rows[str(fork.id)].pending_count) == (
            "interrupted", 1)
    finally:
        views.close()
    report = replay_recorded(app, ReplayOptions(agents=AGENTS))
    verdicts = {c.chat_id: c for c in report.chats}
    assert verdicts[str(chat_id)].status == "identical"  # its ChatForkedTo is no conversation
    assert verdicts[str(fork.id)].status == "skipped"  # its history is its source's
    assert report.passed and report.skipped == 1


def test_fork_over_http_refuses_another_tenants_chat(live: Live) -> None:  # noqa: F811
    chat_id, n = _asked(live.service)
    with httpx.Client(base_url=live.url) as http:
        def fork(key: str, body: object) -> httpx.Response:
            return http.post(f"/v1/chats/{chat_id}/fork", json=body,
                             headers={"Authorization": f"Bearer key-{key}"})

        made = fork("alice", {"version": n})
        assert made.status_code == 201, made.text
        assert made.json()["status"] == "interrupted"
        assert [i["ref"] for i in made.json()["interrupts"]] == ["userApproval-1"]
        other = fork("eve", {"version": n})
        assert other.status_code == 404
        assert other.json()["error"]["code"] == "chat_not_found"
        too_far = fork("alice", {"version": 10_000})
        assert (too_far.status_code, too_far.json()["error"]["code"]) == (422, "invalid_request")
        assert fork("alice", {"version": 0}).status_code == 422
        assert fork("bob", {"version": n}).status_code == 403  # forking starts a chat


def test_a_call_held_for_approval_comes_across_held_and_is_decided_in_the_fork(
        app: Interlock) -> None:
    chat = app.start_chat("treasuryBankingAgent", actor="alice", tenant="acme")
    [ask] = asyncio.run(app.send(chat.id, "Transfer $2500 to savings.", actor="alice")).interrupts
    [held] = asyncio.run(app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})])).interrupts
    n = app.get_chat(chat.id).version
    asyncio.run(app.resume(chat.id, actor="tina", votes=[  # after n: not in the fork
        ApproveEntry(ref=held.ref, name=held.name)]))
    fork = app.fork(chat.id, n, actor="alice", tenant="acme")
    [pending] = fork.pending_interrupts()
    assert pending.approval is not None and pending.approval.votes == []
    assert pending.approval.terms.quorum == 2
    for approver in ("tina", "tom"):
        done = asyncio.run(app.resume(fork.id, actor=approver, votes=[
            ApproveEntry(ref=held.ref, name=held.name)]))
    assert done.finish_reason == "stop" and done.text.startswith("Done.")
    assert app.get_chat(chat.id).state.calls[held.ref].approval.votes[0].actor == "tina"  # type: ignore[union-attr]


def test_a_forks_pending_calls_are_in_the_inbox_and_expire_there(app: Interlock) -> None:
    views = open_read_models(app)
    try:
        chat = app.start_chat("treasuryBankingAgent", actor="alice", tenant="acme")
        [ask] = asyncio.run(app.send(chat.id, "Transfer $2500 to savings.",
                                     actor="alice")).interrupts
        [held] = asyncio.run(app.resume(chat.id, actor="bob", respond=[
            RespondEntry(ref=ask.ref, name=ask.name, output={"approved": True})])).interrupts
        n = app.get_chat(chat.id).version
        fork = app.fork(chat.id, n, actor="alice", tenant="acme")
        asked, at = _asked(app)
        plain = app.fork(asked, at, actor="alice", tenant="acme")  # a tool's own interrupt
        views.catch_up()
        rows = {(r.chat_id, r.ref): r for r in views.inbox(
            InboxFilter(tenant="acme"), 50, None).items}
        copied = rows[str(fork.id), held.ref]
        assert copied.tool == held.name and copied.approval is not None
        assert copied.approval["terms"]["quorum"] == 2 and copied.requested_by == "alice"
        assert rows[str(plain.id), "userApproval-1"].approval is None
        due = views.view(InboxView).due(datetime.now(UTC) + timedelta(days=30), 50)
        assert (str(fork.id), held.ref) in {(c, r) for _, c, r in due}  # the sweeper sees it
    finally:
        views.close()
