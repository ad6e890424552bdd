"""What an approver is told: the tool, its input, who asked, the policy and the deadline, and
where to decide. Email never carries an action (scanners follow links); Slack carries buttons
whose callbacks are signed by Slack and checked here, and only under the whole input, shown
inert: escaped for mrkdwn, so it can neither format, mention, link nor end its code block."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

from interlock.domain.chat.canonical import sha256_hex
from interlock.domain.chat.state import ToolCall

OPEN = "open_console"
APPROVE = "approve"
REJECT = "reject"
SLACK_TEXT = 3000  # Slack's limit on a section's text
FENCE = "```"


def facts(call: ToolCall, chat_id: str, tenant: str, console_url: str) -> dict[str, Any]:
    """The call as every message tells it, read from the chat as it was asked when sent."""
    terms = call.approval.current() if call.approval is not None else None  # its stage
    return {
        "chat_id": chat_id, "ref": call.ref, "tool": call.name, "tenant": tenant,
        "input": call.input, "input_sha256": sha256_hex(call.input),
        "requested_by": terms.requested_by if terms else call.requested_by,
        "roles": terms.roles if terms else [], "quorum": terms.quorum if terms else 1,
        "expires_at": terms.expires_at.isoformat() if terms and terms.expires_at else None,
        "link": f"{console_url.rstrip('/')}/ui/chats/{chat_id}/interrupts/{call.ref}",
    }


def summary(f: dict[str, Any]) -> str:
    deadline = f"; decide by {deadline_text(f['expires_at'])}" if f["expires_at"] else ""
    return (f"{f['requested_by'] or 'someone'} asks to run {f['tool']} "
            f"({', '.join(f['roles'])}, {f['quorum']} approval{'s' * (f['quorum'] > 1)}"
            f"{deadline})")


def deadline_text(iso: str) -> str:
    """A deadline as people read it: `2026-01-01 12:05 UTC`, not ISO with microseconds."""
    return f"{datetime.fromisoformat(iso).astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def email(f: dict[str, Any], to: str, sender: str) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = f"Approval needed: {f['tool']}"
    message["From"], message["To"] = sender, to
    message.set_content(
        f"{summary(f)}.\n\nInput:\n{json.dumps(f['input'], indent=2, ensure_ascii=False)}\n\n"
        f"Open the call to decide (sign in first): {f['link']}\n")
    return message


def digest(all_facts: list[dict[str, Any]], to: str, sender: str) -> EmailMessage:
    """One mail for the calls asked in a digest's period, each with its link."""
    message = EmailMessage()
    message["Subject"] = f"{len(all_facts)} approvals needed"
    message["From"], message["To"] = sender, to
    parts = [f"{summary(f)}.\nInput: {json.dumps(f['input'], ensure_ascii=False)}\n"
             f"Open it to decide (sign in first): {f['link']}\n" for f in all_facts]
    message.set_content("\n".join(parts))
    return message


def mrkdwn(text: str) -> str:
    """`text` shown as itself in Slack's mrkdwn: `&`, `<`, `>` as Slack asks them escaped (no
    mention, link or command can form), and no backtick, so no code block can end early."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace("`", "\u02cb")


def shown_input(value: Any) -> str:
    """The input as JSON, inert: a backtick only occurs inside a JSON string, where `\\u0060`
    is the same character, so the text shown still decodes to exactly the input."""
    text = json.dumps(value, ensure_ascii=False).replace("`", "\\u0060")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_blocks(f: dict[str, Any]) -> list[dict[str, Any]]:
    """The message: Approve and Reject only when the whole input is shown; otherwise the
    start of it, marked as cut, and only Open in console."""
    shown = FENCE + shown_input(f["input"]) + FENCE
    whole = len(shown) <= SLACK_TEXT
    if not whole:
        shown = _cut(shown, len(json.dumps(f["input"], ensure_ascii=False)))
    link = {"type": "button", "action_id": OPEN, "url": f["link"],
            "text": {"type": "plain_text", "text": "Open in console"}}
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{mrkdwn(summary(f))}*"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": shown}},
        {"type": "actions", "block_id": "decide",
         "elements": [*_votes(f), link] if whole else [link]},
    ]


def _votes(f: dict[str, Any]) -> list[dict[str, Any]]:
    value = json.dumps({"chat_id": f["chat_id"], "ref": f["ref"],
                        "input_sha256": f["input_sha256"]})
    return [{"type": "button", "action_id": APPROVE, "style": "primary", "value": value,
             "text": {"type": "plain_text", "text": "Approve"}},
            {"type": "button", "action_id": REJECT, "style": "danger", "value": value,
             "text": {"type": "plain_text", "text": "Reject"}}]


def _cut(shown: str, length: int) -> str:
    """The start of a fenced input too long for Slack, closed and marked as cut (never cut
    inside an escape)."""
    marker = (f" …{FENCE}\n_Cut: the input is {length:,} characters, more than a Slack "
              "message shows. Open it in the console to decide._")
    start = shown[:SLACK_TEXT - len(marker)]
    entity = start.rfind("&")
    if entity > len(start) - 6 and ";" not in start[entity:]:
        start = start[:entity]
    return start + marker


def slack_decided(f: dict[str, Any], outcome: str) -> list[dict[str, Any]]:
    text = f"~{mrkdwn(summary(f))}~\n*{mrkdwn(outcome)}*"
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]


def reject_modal(value: str) -> dict[str, Any]:
    return {"type": "modal", "callback_id": REJECT, "private_metadata": value,
            "title": {"type": "plain_text", "text": "Reject"},
            "submit": {"type": "plain_text", "text": "Reject"},
            "blocks": [{"type": "input", "block_id": "reason", "label": {
                "type": "plain_text", "text": "Why?"}, "element": {
                "type": "plain_text_input", "action_id": "reason", "multiline": True}}]}
