"""A Slack message shows exactly what its Approve button approves: the input inert in mrkdwn,
and no Approve when the whole input cannot be shown."""

from __future__ import annotations

import json
from typing import Any

import pytest

from interlock.domain.chat.canonical import sha256_hex
from interlock.notify import messages

HOSTILE = {"memo": "```\n<!channel> <https://evil.test/pay|APPROVE HERE> & *now* `ok`",
           "`key`": "<@U0ADMIN>"}


def _facts(value: Any, tool: str = "pay") -> dict[str, Any]:
    return {"chat_id": "c1", "ref": "pay-1", "tool": tool, "tenant": "acme", "input": value,
            "input_sha256": sha256_hex(value), "requested_by": "alice", "roles": ["treasury"],
            "quorum": 2, "expires_at": None, "link": "http://console.test/ui/chats/c1/pay-1"}


def _shown(blocks: list[dict[str, Any]]) -> str:
    text: str = blocks[1]["text"]["text"]
    return text


def _actions(blocks: list[dict[str, Any]]) -> list[str]:
    return [e["action_id"] for e in blocks[2]["elements"]]


def _unescaped(text: str) -> str:
    """What Slack renders of escaped mrkdwn text."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def test_an_input_that_would_close_the_code_block_mention_and_link_renders_inert() -> None:
    blocks = messages.slack_blocks(_facts(HOSTILE))
    shown = _shown(blocks)
    inner = shown.removeprefix("```").removesuffix("```")
    assert "`" not in inner  # the code block ends where Interlock ends it, nowhere else
    assert "<" not in shown and ">" not in shown  # no mention, link or command can form
    assert "&lt;!channel&gt;" in shown and " &amp; " in shown
    assert json.loads(_unescaped(inner)) == HOSTILE  # what is shown is exactly the input
    assert _actions(blocks) == ["approve", "reject", "open_console"]


def test_the_summary_and_the_outcome_are_escaped_too() -> None:
    blocks = messages.slack_blocks(_facts(1, tool="<!here>`x`"))
    assert blocks[0]["text"]["text"] == (
        "*alice asks to run &lt;!here&gt;\u02cbx\u02cb (treasury, 2 approvals)*")
    decided = messages.slack_decided(_facts(1), "approved (approve by <@U1>)")
    assert "&lt;@U1&gt;" in decided[0]["text"]["text"]


@pytest.mark.parametrize("memo", ["x" * 3000, "<" * 3000, "&" * 1000 + "`" * 400])
def test_an_input_too_long_to_show_whole_has_no_approve_only_the_console(memo: str) -> None:
    blocks = messages.slack_blocks(_facts({"memo": memo}))
    assert _actions(blocks) == ["open_console"]
    assert blocks[2]["elements"][0]["url"] == "http://console.test/ui/chats/c1/pay-1"
    shown = _shown(blocks)
    assert len(shown) <= messages.SLACK_TEXT and "<" not in shown and ">" not in shown
    assert shown.count("```") == 2 and "Open it in the console to decide" in shown
    cut = shown.split("```")[1]
    assert cut.endswith(" …") and "&" not in cut.replace("&lt;", "").replace("&amp;", "")


def test_the_longest_input_shown_whole_still_carries_approve() -> None:
    room = messages.SLACK_TEXT - len('```{"memo": ""}```')
    fits = messages.slack_blocks(_facts({"memo": "y" * room}))
    assert len(_shown(fits)) == messages.SLACK_TEXT and "approve" in _actions(fits)
    assert "approve" not in _actions(messages.slack_blocks(_facts({"memo": "y" * (room + 1)})))
