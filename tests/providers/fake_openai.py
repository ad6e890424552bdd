"""A fake OpenAI `/v1/chat/completions`: JSON bodies and `data:` SSE chunks ending in [DONE]."""

from __future__ import annotations

import json
from typing import Any

from tests.providers.fakes import Failure, FakeProvider, Reply, SSEEvent, pieces

CREATED = 1_700_000_000
ERROR_TYPES = {429: "requests", 400: "invalid_request_error", 404: "invalid_request_error"}


class FakeOpenAI(FakeProvider):
    """Answers chat completions the way api.openai.com documents them."""

    path = "/v1/chat/completions"

    def system(self, index: int = -1) -> str | None:
        found = [m["content"] for m in self.body(index)["messages"] if m["role"] == "system"]
        return found[0] if found else None

    def user_texts(self, index: int = -1) -> list[str]:
        return [m["content"] for m in self.body(index)["messages"] if m["role"] == "user"]

    def tool_calls(self, index: int = -1) -> list[tuple[str, str, Any]]:
        return [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for m in self.body(index)["messages"] if m["role"] == "assistant"
            for c in m.get("tool_calls") or []
        ]

    def tool_results(self, index: int = -1) -> list[tuple[str, str]]:
        return [(m["tool_call_id"], m["content"])
                for m in self.body(index)["messages"] if m["role"] == "tool"]

    def tool_schemas(self, index: int = -1) -> dict[str, dict[str, Any]]:
        return {t["function"]["name"]: t["function"]["parameters"]
                for t in self.body(index).get("tools", [])}

    def render_json(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None,
                                   "refusal": None, "annotations": []}
        if reply.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for c in reply.calls
            ]
        choice = {"index": 0, "message": message, "logprobs": None,
                  "finish_reason": _finish(reply)}
        return {**_envelope(body, "chat.completion"), "choices": [choice], "usage": _usage(reply)}

    def render_events(self, reply: Reply, body: dict[str, Any]) -> list[SSEEvent]:
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        deltas: list[tuple[dict[str, Any], str | None]] = [
            ({"role": "assistant", "content": "", "refusal": None}, None)]
        if reply.text:
            deltas += [({"content": piece}, None) for piece in pieces(reply.text, 5)]
        for index, call in enumerate(reply.calls):
            deltas.append(({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                            "function": {"name": call.name, "arguments": ""}}]},
                           None))
            deltas += [({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, None)
                       for piece in pieces(call.arguments)]
        deltas.append(({}, _finish(reply)))
        chunks = [_chunk(body, delta, finish, with_usage) for delta, finish in deltas]
        if with_usage:
            chunks.append({**_envelope(body, "chat.completion.chunk"), "choices": [],
                           "usage": _usage(reply)})
        return [*[(None, c) for c in chunks], (None, "[DONE]")]

    def render_error(self, failure: Failure) -> dict[str, Any]:
        kind = ERROR_TYPES.get(failure.status, "server_error")
        return {"error": {"message": failure.message, "type": kind, "param": None,
                          "code": "rate_limit_exceeded" if failure.status == 429 else None}}


def _envelope(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": kind, "created": CREATED, "model": body["model"],
            "system_fingerprint": "fp_fake", "service_tier": "default"}


def _chunk(
    body: dict[str, Any], delta: dict[str, Any], finish: str | None, with_usage: bool
) -> dict[str, Any]:
    chunk = {**_envelope(body, "chat.completion.chunk"),
             "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    return {**chunk, "usage": None} if with_usage else chunk


def _finish(reply: Reply) -> str:
    return "tool_calls" if reply.calls else "stop"


def _usage(reply: Reply) -> dict[str, int]:
    return {"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens}
