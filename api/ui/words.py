"""The console in an approver's words: events, fields, amounts and hashes as people read them.

The exact input stays on the page as JSON (an approver approves exactly it, by hash); these
are the readings beside it: `amount 2,500.00 USD` rather than `2500.0`, "Vote: approve"
rather than `ApprovalVoted`, a hash's first 12 characters with the whole in its title.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

# What each chat event means on the timeline; an unknown type is shown as recorded.
EVENT_WORDS = {
    "ChatStarted": "Chat started",
    "UserMessageSent": "Message sent",
    "TurnRetried": "Turn retried",
    "TurnHeartbeat": "Turn still running",
    "ModelResponded": "The model answered",
    "ToolRequested": "The agent asked to run a tool",
    "ToolCompleted": "The tool ran",
    "ToolFailed": "The tool failed",
    "Interrupted": "Held for a decision",
    "Responded": "Answered in the tool's place",
    "Restarted": "Run again with an input",
    "TurnFinished": "Turn finished",
    "ApprovalRequested": "Approval requested",
    "ApprovalVoted": "Vote",
    "ApprovalEscalated": "Escalated to more approvers",
    "InterruptExpired": "Deadline passed: failed closed",
    "InterruptWithdrawn": "Request withdrawn",
    "AgentFingerprinted": "Agent version recorded",
    "ChatForked": "Forked from another chat",
    "ChatForkedTo": "Forked into a new chat",
    "ErasureBegun": "Erasure of personal data begun",
}
# Fields read as money: formatted with separators and cents, in the input's own currency.
AMOUNT_FIELDS = frozenset({"amount", "total", "price", "cost", "fee", "balance", "sum"})
CURRENCY_FIELDS = ("currency", "currency_code", "ccy")
SHORT_SHA = 12
SUMMARY_FIELDS = 3  # an inbox row shows the first few fields; the rest is a click away
CLIP = 28


def event_words(kind: str, data: Any) -> str:
    """A timeline entry's words: `Vote: approve` for an `ApprovalVoted` approving."""
    words = EVENT_WORDS.get(kind, kind)
    if kind == "ApprovalVoted" and isinstance(data, dict) and data.get("vote"):
        return f"{words}: {data['vote']}"
    if kind == "ToolRequested" and isinstance(data, dict) and data.get("name"):
        return f"The agent asked to run {data['name']}"
    return words


def label(key: str) -> str:
    """`to_account` → "To account", `dueDate` → "Due date"."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key).replace("_", " ").replace("-", " ")
    text = " ".join(spaced.split()).lower()
    return text[:1].upper() + text[1:] if text else key


def is_amount(key: str) -> bool:
    lowered = key.lower()
    return lowered in AMOUNT_FIELDS or lowered.endswith(("_amount", "amount"))


def currency_of(value: Any) -> str | None:
    """The input's own currency field, if it has one."""
    if not isinstance(value, dict):
        return None
    for key in CURRENCY_FIELDS:
        found = value.get(key)
        if isinstance(found, str) and found.strip():
            return found.strip().upper()
    return None


def money(amount: Any, currency: str | None) -> str:
    """`2500.0` → "2,500.00" (with its currency when known: "2,500.00 EUR")."""
    try:
        number = Decimal(str(amount))
    except InvalidOperation:
        return str(amount)
    if not number.is_finite():
        return str(amount)
    text = f"{number:,.2f}"
    return f"{text} {currency}" if currency else text


def shown(key: str, value: Any, currency: str | None) -> str:
    """One field's value in words."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float) and is_amount(key):
        return money(value, currency)
    if value is None:
        return "—"
    if isinstance(value, dict | list):
        return f"{len(value)} item{'s' if len(value) != 1 else ''}" if isinstance(
            value, list) else f"{len(value)} field{'s' if len(value) != 1 else ''}"
    return str(value)


@dataclass(frozen=True)
class Field:
    """One labelled value of an input or of an interrupt's details."""

    key: str
    label: str
    text: str


def fields(value: Any) -> list[Field]:
    """An object's fields in words, in their order (currency folded into the amount);
    anything else as one field."""
    if not isinstance(value, dict):
        return [] if value is None else [Field("value", "Value", shown("value", value, None))]
    currency = currency_of(value)
    amounts = any(is_amount(k) for k in value)
    return [Field(str(k), label(str(k)), shown(str(k), v, currency)) for k, v in value.items()
            if not (amounts and currency and k in CURRENCY_FIELDS)]


def summary(value: Any) -> str:
    """An inbox row's input in one line: its first fields, each clipped."""
    found = fields(value)
    parts = [f"{f.label.lower()} {clip(f.text)}" for f in found[:SUMMARY_FIELDS]]
    more = len(found) - SUMMARY_FIELDS
    return " · ".join(parts) + (f" · {more} more" if more > 0 else "")


def clip(text: str, width: int = CLIP) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def short_sha(value: str) -> str:
    """A hash's first characters, for a page; its title keeps the whole of it."""
    return value[:SHORT_SHA] + "…" if len(value) > SHORT_SHA else value
