"""The console's readings of inputs and events (api/ui/words.py), without a browser."""

from __future__ import annotations

from interlock.api.ui.words import event_words, fields, label, money, short_sha, summary


def test_amounts_read_as_money_in_the_inputs_own_currency() -> None:
    assert money(2500.0, None) == "2,500.00"
    assert money(1234567, "EUR") == "1,234,567.00 EUR"
    found = fields({"amount": 2500.0, "currency": "eur", "to_account": "savings"})
    assert [(f.label, f.text) for f in found] == [("Amount", "2,500.00 EUR"),
                                                  ("To account", "savings")]
    assert fields({"count": 2500.0})[0].text == "2500.0"  # not money: as given


def test_an_inbox_row_shows_the_first_fields_and_says_how_many_more() -> None:
    assert summary({"amount": 950, "to": "umbrella"}) == "amount 950.00 · to umbrella"
    many = summary({"a": 1, "b": True, "c": None, "d": [1, 2], "e": "x" * 40})
    assert many == "a 1 · b yes · c — · 2 more"
    assert summary({"note": "y" * 40}).endswith("…")


def test_labels_hashes_and_events_in_words() -> None:
    assert label("dueDate") == "Due date" and label("to_account") == "To account"
    assert short_sha("a" * 64) == "a" * 12 + "…"
    assert event_words("ApprovalVoted", {"vote": "reject"}) == "Vote: reject"
    assert event_words("ToolRequested", {"name": "pay"}) == "The agent asked to run pay"
    assert event_words("SomethingNew", {}) == "SomethingNew"
