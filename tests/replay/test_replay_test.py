"""Replay as a test on the banking agents: each kind of change is named where it departs."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from eventsourcing.persistence import PersistenceError

from interlock.domain import Chat, FunctionModel, ModelRequest, ModelResponse
from interlock.domain.chat.approval_events import ApprovalVoted
from interlock.domain.chat.events import now
from interlock.domain.errors import UnavailableError
from interlock.examples.banking import AGENTS, LEDGER, banking, banking_script
from interlock.replay import ReplayOptions, Report, Selection, open_recorded, replay_test
from interlock.replay.compare import UNSAID, first_difference
from interlock.replay.runner import SKIPPED_ERASED
from interlock.stores.erasure_keys import KeyStore
from tests.replay import variants
from tests.replay.conftest import Recorded
from tests.replay.corpus import served, treasury_edited

# The corpus (tests/replay/corpus.py), in order: small transfer, large transfer (override),
# declined, treasury (held, two votes), treasury small (not held).
SMALL, LARGE, DECLINED, TREASURY, TREASURY_SMALL = range(5)


def _kinds(report: Report) -> list[str | None]:
    return [c.difference.kind if c.difference else None for c in report.chats]


def test_an_unchanged_agent_replays_every_chat_identical_and_writes_nothing(
        recorded: Recorded) -> None:
    before, transfers = recorded.dump(), LEDGER.transfers
    report = replay_test(recorded.url, ReplayOptions(agents=AGENTS))
    assert report.passed and report.identical == 5, report.to_json()
    assert [c.chat_id for c in report.chats] == [str(c) for c in recorded.chats]
    # 10 tool runs (5 userApproval, 5 transferMoney) were answered from the recording...
    assert sum(c.tool_runs for c in report.chats) == 10
    assert LEDGER.transfers == transfers  # ...none ran: no transfer was made
    assert recorded.dump() == before  # the store is byte for byte as it was


def test_an_edit_with_its_reason_replays_identical(store: str) -> None:
    """An approver's edit carries a reason; the replay re-applies it with that reason."""
    app = served(store)
    try:
        chat = asyncio.run(treasury_edited(app))
    finally:
        app.close()
    report = replay_test(store, ReplayOptions(agents=AGENTS), Selection(chats=[chat]))
    assert report.passed and report.identical == 1, report.to_json()


def test_an_edit_recorded_before_reasons_were_required_compares_alike() -> None:
    """Such an edit replays with a placeholder reason (the domain asks for one now)."""
    recorded = ApprovalVoted(originator_id=uuid4(), originator_version=5, timestamp=now(),
                             ref="t1", name="transferMoney", vote="edit", actor="tina",
                             input_sha256="0" * 64, edited_input={"amount": 1})
    replayed = recorded.model_copy(update={"reason": UNSAID})
    assert first_difference([recorded], [replayed], masked=False) is None
    said = recorded.model_copy(update={"reason": "the invoice"})
    assert first_difference([recorded], [said], masked=False) is not None


def test_a_changed_system_prompt_drifts_at_the_first_model_call(recorded: Recorded) -> None:
    report = replay_test(recorded.url, ReplayOptions(agents=variants.prompt_changed(),
                                                     baselines=AGENTS))
    assert _kinds(report) == ["prompt_drift"] * 3 + [None, None]  # the treasury agent is as was
    drift = report.chats[SMALL].difference
    assert drift is not None and drift.event == "ModelResponded"
    assert drift.version == 3  # ChatStarted, UserMessageSent (the fingerprint too), the reply
    assert drift.detail.startswith("model call 1")
    assert drift.diff is not None
    removed = [line for line in drift.diff.splitlines() if line.startswith("-  ")]
    added = [line for line in drift.diff.splitlines() if line.startswith("+  ")]
    assert removed == [f'-     "text": "{banking.system}"']
    assert added == [f'+     "text": "{variants.NEW_PROMPT}"']
    assert report.totals == {"prompt_drift": 3}
    assert not report.passed


def test_without_the_recorded_agent_only_messages_are_compared_and_it_says_so(
        recorded: Recorded) -> None:
    report = replay_test(recorded.url, ReplayOptions(agents=variants.prompt_changed()))
    small = report.chats[SMALL]
    assert small.status == "identical"
    assert any("not among the baselines" in note for note in small.notes)


def test_a_changed_tool_input_is_a_tool_call_changed(recorded: Recorded) -> None:
    transfers = LEDGER.transfers
    report = replay_test(recorded.url, ReplayOptions(agents=variants.tool_input_changed(),
                                                     baselines=AGENTS))
    assert _kinds(report) == ["tool_call_changed", "tool_call_changed", None, None, None]
    changed = report.chats[SMALL].difference
    assert changed is not None and changed.event == "ToolRequested"
    assert changed.expected == [{"amount": 500.0, "to_account": "savings"}]
    assert changed.actual["input"] == {"amount": 500.0, "to_account": "SAVINGS"}
    assert changed.version == 9  # the recorded ToolRequested of that call
    assert LEDGER.transfers == transfers


def test_an_edited_approval_amount_no_longer_applies(recorded: Recorded) -> None:
    report = replay_test(recorded.url, ReplayOptions(agents=variants.amount_changed(),
                                                     live_model=True))
    held = report.chats[TREASURY].difference
    assert held is not None and held.kind == "approval_no_longer_applies"
    assert held.event == "ApprovalVoted"
    assert held.expected["input"] == {"amount": 2500.0, "to_account": "savings"}
    assert held.actual["input"] == {"amount": 2505.0, "to_account": "savings"}
    assert held.expected["input_sha256"] != held.actual["input_sha256"]
    # where the new amount would run, it is a tool call never recorded
    assert _kinds(report)[SMALL] == "tool_call_changed"


def test_a_new_policy_is_a_policy_change(recorded: Recorded) -> None:
    report = replay_test(recorded.url, ReplayOptions(agents=variants.policy_changed(),
                                                     baselines=AGENTS))
    assert _kinds(report) == ["policy_changed", "policy_changed", None, "policy_changed", None]
    held = report.chats[SMALL].difference
    assert held is not None and held.actual["type"] == "ApprovalRequested"
    assert held.expected["type"] == "ToolCompleted"
    assert held.detail == "the new policies hold a call that ran unheld"
    quorum = report.chats[TREASURY].difference
    assert quorum is not None
    assert quorum.detail == "the new policies hold it on other terms: quorum"
    assert (quorum.expected["terms"]["quorum"], quorum.actual["terms"]["quorum"]) == (2, 3)


def test_a_selection_replays_only_its_chats(recorded: Recorded) -> None:
    options = ReplayOptions(agents=AGENTS)
    treasury = replay_test(recorded.url, options, Selection(agent="treasuryBankingAgent"))
    assert [c.chat_id for c in treasury.chats] == [
        str(recorded.chats[TREASURY]), str(recorded.chats[TREASURY_SMALL])]
    named = replay_test(recorded.url, options, Selection(chats=[recorded.chats[LARGE]]))
    assert [c.chat_id for c in named.chats] == [str(recorded.chats[LARGE])]
    assert len(replay_test(recorded.url, options, Selection(limit=2)).chats) == 2
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert replay_test(recorded.url, options, Selection(since=later)).chats == []
    assert len(replay_test(recorded.url, options, Selection(until=later)).chats) == 5


def test_a_chat_of_an_agent_the_new_version_lacks_is_not_replayable(recorded: Recorded) -> None:
    report = replay_test(recorded.url, ReplayOptions(agents=[AGENTS[0]]))
    assert _kinds(report)[TREASURY] == "not_replayable"
    assert report.chats[TREASURY].difference.detail == (  # type: ignore[union-attr]
        "no new agent is named treasuryBankingAgent")


def test_an_erased_chat_is_skipped_not_failed(recorded: Recorded) -> None:
    app = served(recorded.url)
    try:
        KeyStore.open(app).erase(recorded.chats[DECLINED])
    finally:
        app.close()
    report = replay_test(recorded.url, ReplayOptions(agents=AGENTS))
    declined = report.chats[DECLINED]
    assert (declined.status, declined.notes) == ("skipped", [SKIPPED_ERASED])
    assert report.passed and (report.identical, report.skipped) == (4, 1)


def test_a_chat_whose_erasure_began_is_skipped_while_its_key_is_still_there(
    recorded: Recorded,
) -> None:
    app = served(recorded.url)
    try:
        app.begin_erasure(recorded.chats[DECLINED], actor="operator")  # an erase cut short
    finally:
        app.close()
    report = replay_test(recorded.url, ReplayOptions(agents=AGENTS, live_model=True))
    declined = report.chats[DECLINED]
    assert (declined.status, declined.notes) == ("skipped", [SKIPPED_ERASED])


def test_a_live_model_is_called_and_an_unchanged_one_answers_alike(recorded: Recorded) -> None:
    calls: list[ModelRequest] = []

    def script(request: ModelRequest) -> ModelResponse:
        calls.append(request)
        return banking_script(request)

    model = FunctionModel(script, name="banking-script")
    agents = [replace(a, model=model) for a in AGENTS]
    report = replay_test(recorded.url, ReplayOptions(agents=agents, live_model=True))
    assert report.identical == 5
    assert len(calls) == sum(c.model_calls for c in report.chats) == 15


def test_the_recorded_store_is_opened_read_only(recorded: Recorded) -> None:
    before = recorded.dump()
    app = open_recorded(recorded.url)
    try:
        assert app.get_chat(recorded.chats[SMALL]).status == "idle"  # it reads
        # refused: by the store, or by the guard that takes a read-only store as unavailable
        with pytest.raises((PersistenceError, UnavailableError)):
            app.commit(Chat.start("bankingAgent", actor="mallory", tenant="acme"))
    finally:
        app.close()
    assert recorded.dump() == before
