"""The demo bank refuses a transfer its checking account cannot cover: no negative ledger."""

from __future__ import annotations

from interlock.bootstrap import build_service
from interlock.domain import RespondEntry
from interlock.examples.banking import AGENTS, LEDGER
from tests.kit import run


def test_a_transfer_beyond_the_balance_is_refused_and_nothing_moves(sqlite_store: str) -> None:
    app = build_service(sqlite_store, AGENTS)
    chat = app.start_chat("bankingAgent", actor="alice")
    [ask] = run(app.send(chat.id, "Transfer $7000 to savings.", actor="alice")).interrupts
    before = LEDGER.transfers
    done = run(app.resume(chat.id, actor="bob", respond=[
        RespondEntry(ref=ask.ref, name="userApproval", output={"approved": True})]))
    assert done.finish_reason == "stop"
    assert done.text == ("The transfer failed: InsufficientFundsError: checking holds "
                         "$5,000.00, the transfer needs $7,000.00")
    assert LEDGER.transfers == before
    assert LEDGER.balances(str(chat.id)) == {"checking": 5000.0, "savings": 0.0}


def test_each_chat_has_its_own_account(sqlite_store: str) -> None:
    app = build_service(sqlite_store, AGENTS)
    for _ in range(3):  # 3 x 900 from one account of 5000 would leave 2300; each has its own
        chat = app.start_chat("bankingAgent", actor="alice")
        [ask] = run(app.send(chat.id, "Transfer $900 to savings.", actor="alice")).interrupts
        done = run(app.resume(chat.id, actor="bob", respond=[
            RespondEntry(ref=ask.ref, name="userApproval", output={"approved": True})]))
        assert done.text == "Done. Your checking balance is now $4,100.00."
