"""The exact wire shapes each provider is sent, and what its replies become."""

from __future__ import annotations

from typing import Any

from interlock.domain.chat.messages import Message, Part, ToolRequest, ToolResponse, text_message
from interlock.domain.runtime.models import ToolDefinition
from interlock.providers import anthropic_wire, openai_wire
from interlock.providers.wire import INVALID_JSON, parse_arguments, split_system

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"amount": {"type": "number"}},
                          "required": ["amount"]}
TOOLS = [ToolDefinition(name="pay", description="Pay someone.", input_schema=SCHEMA)]
HISTORY = [
    text_message("system", "Be careful."),
    text_message("user", "pay 5 twice"),
    Message(role="model", content=[
        Part(text="Paying."),
        Part(tool_request=ToolRequest(ref="c1", name="pay", input={"amount": 5})),
        Part(tool_request=ToolRequest(ref="c2", name="pay", input={"amount": 5})),
    ]),
    Message(role="tool", content=[
        Part(tool_response=ToolResponse(ref="c1", name="pay", output={"ok": True})),
        Part(tool_response=ToolResponse(ref="c2", name="pay", output={"error": "card declined"}),
             metadata={"failed": True}),  # the flag, not the shape, marks a failure
    ]),
]


def test_openai_messages_and_tools() -> None:
    assert openai_wire.to_messages(HISTORY) == [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": "pay 5 twice"},
        {"role": "assistant", "content": "Paying.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "pay", "arguments": '{"amount":5}'}},
            {"id": "c2", "type": "function",
             "function": {"name": "pay", "arguments": '{"amount":5}'}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok":true}'},
        {"role": "tool", "tool_call_id": "c2", "content": '{"error":"card declined"}'},
    ]
    assert openai_wire.to_tools(TOOLS) == [{"type": "function", "function": {
        "name": "pay", "description": "Pay someone.", "parameters": SCHEMA}}]


def test_openai_assistant_without_text_sends_null_content() -> None:
    message = Message(role="model", content=[
        Part(tool_request=ToolRequest(ref="c1", name="pay", input=None))])
    assert openai_wire.to_messages([message]) == [{"role": "assistant", "content": None,
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "pay", "arguments": "{}"}}]}]


def test_anthropic_messages_and_tools() -> None:
    system, conversation = split_system(HISTORY)
    assert system == "Be careful."
    assert anthropic_wire.to_messages(conversation) == [
        {"role": "user", "content": [{"type": "text", "text": "pay 5 twice"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Paying."},
            {"type": "tool_use", "id": "c1", "name": "pay", "input": {"amount": 5}},
            {"type": "tool_use", "id": "c2", "name": "pay", "input": {"amount": 5}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": '{"ok":true}'},
            {"type": "tool_result", "tool_use_id": "c2", "content": "card declined",
             "is_error": True},
        ]},
    ]
    assert anthropic_wire.to_tools(TOOLS) == [
        {"name": "pay", "description": "Pay someone.", "input_schema": SCHEMA}]


def test_anthropic_merges_neighbouring_user_turns_and_drops_empty_ones() -> None:
    messages = [
        Message(role="tool", content=[Part(tool_response=ToolResponse(
            ref="c1", name="pay", output="paid"))]),
        text_message("user", "and now?"),
        Message(role="model", content=[]),
    ]
    assert anthropic_wire.to_messages(messages) == [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "paid"},
        {"type": "text", "text": "and now?"},
    ]}]


def test_anthropic_tool_input_is_always_an_object() -> None:
    message = Message(role="model", content=[
        Part(tool_request=ToolRequest(ref="a", name="pay", input=None)),
        Part(tool_request=ToolRequest(ref="b", name="pay", input=[1, 2])),
    ])
    [turn] = anthropic_wire.to_messages([message])
    blocks: Any = turn["content"]
    assert [b["input"] for b in blocks] == [{}, {"input": [1, 2]}]


def test_tool_arguments_parse_or_are_kept_raw() -> None:
    assert parse_arguments('{"a": [1, 2]}') == {"a": [1, 2]}
    assert parse_arguments("") == {}
    assert parse_arguments(None) == {}
    assert parse_arguments('{"a": ') == {INVALID_JSON: '{"a": '}


def test_an_openai_reply_keeps_text_call_ids_and_usage() -> None:
    message = openai_wire.model_message("Hi", [("id1", "pay", '{"amount": 1}'), (None, "pay", "")])
    assert message == Message(role="model", content=[
        Part(text="Hi"),
        Part(tool_request=ToolRequest(ref="id1", name="pay", input={"amount": 1})),
        Part(tool_request=ToolRequest(ref=None, name="pay", input={})),
    ])


def test_an_empty_tool_description_is_left_out() -> None:
    bare = [ToolDefinition(name="ping", description="", input_schema={"type": "object"})]
    assert openai_wire.to_tools(bare) == [
        {"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}]
    assert anthropic_wire.to_tools(bare) == [{"name": "ping", "input_schema": {"type": "object"}}]
