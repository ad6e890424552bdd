"""A fake Anthropic `/v1/messages`: Messages JSON and its named SSE events."""

from __future__ import annotations

import json
from typing import Any

from tests.providers.fakes import Failure, FakeProvider, Reply, SSEEvent, pieces

ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 429: "rate_limit_error",
               529: "overloaded_error"}


class FakeAnthropic(FakeProvider):
    """Answers Messages requests the way api.anthropic.com documents them."""

    path = "/v1/messages"

    def system(self, index: int = -1) -> str | None:
        return self.body(index).get("system")

    def user_texts(self, index: int = -1) -> list[str]:
        return [b["text"] for b in self._blocks(index, "user") if b["type"] == "text"]

    def tool_calls(self, index: int = -1) -> list[tuple[str, str, Any]]:
        return [(b["id"], b["name"], b["input"])
                for b in self._blocks(index, "assistant") if b["type"] == "tool_use"]

    def tool_results(self, index: int = -1) -> list[tuple[str, str]]:
        return [(b["tool_use_id"], b["content"])
                for b in self._blocks(index, "user") if b["type"] == "tool_result"]

    def tool_schemas(self, index: int = -1) -> dict[str, dict[str, Any]]:
        return {t["name"]: t["input_schema"] for t in self.body(index).get("tools", [])}

    def _blocks(self, index: int, role: str) -> list[dict[str, Any]]:
        return [b for m in self.body(index)["messages"] if m["role"] == role for b in m["content"]]

    def render_json(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name,
                     "input": json.loads(c.arguments)} for c in reply.calls]
        return {**_message(body, reply), "content": content, "stop_reason": _stop(reply),
                "usage": _usage(reply.input_tokens, reply.output_tokens)}

    def render_events(self, reply: Reply, body: dict[str, Any]) -> list[SSEEvent]:
        start = {**_message(body, reply), "content": [], "stop_reason": None,
                 "usage": _usage(reply.input_tokens, 1)}
        events: list[SSEEvent] = [("message_start", {"type": "message_start", "message": start}),
                                  ("ping", {"type": "ping"})]
        blocks = ([_text_block(reply.text)] if reply.text else []) + [
            _tool_block(c.id, c.name, c.arguments) for c in reply.calls]
        for index, (block, deltas) in enumerate(blocks):
            events += _block_events(index, block, deltas)
        events += [
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": _stop(reply), "stop_sequence": None},
                               "usage": {"output_tokens": reply.output_tokens}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        return events

    def render_error(self, failure: Failure) -> dict[str, Any]:
        kind = ERROR_TYPES.get(failure.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": failure.message},
                "request_id": "req_fake"}


Block = tuple[dict[str, Any], list[dict[str, Any]]]


def _text_block(text: str) -> Block:
    return {"type": "text", "text": ""}, [
        {"type": "text_delta", "text": piece} for piece in pieces(text, 5)]


def _tool_block(ref: str, name: str, arguments: str) -> Block:
    # The API opens with an empty fragment, then sends the input JSON in pieces.
    return {"type": "tool_use", "id": ref, "name": name, "input": {}}, [
        {"type": "input_json_delta", "partial_json": piece} for piece in ["", *pieces(arguments)]]


def _block_events(
    index: int, block: dict[str, Any], deltas: list[dict[str, Any]]
) -> list[SSEEvent]:
    return [
        ("content_block_start",
         {"type": "content_block_start", "index": index, "content_block": block}),
        *[("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
          for d in deltas],
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def _message(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
            "stop_sequence": None}


def _stop(reply: Reply) -> str:
    return "tool_use" if reply.calls else "end_turn"


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
