"""The synchronous client: `Client` and the `Chat` handles it gives out."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any, cast

import httpx

from interlock.client._errors import from_text
from interlock.client._models import (
    STREAM,
    Decision,
    Respond,
    Restart,
    StreamEvent,
    TurnResult,
    decide_body,
    key_header,
    message_body,
    query,
    resume_body,
    start_body,
)
from interlock.client._shapes import ChatState, DecisionRecord, InboxItem, Page
from interlock.client._sse import EventParser


class Client:
    """Talks to one Interlock server with one API key."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = http or httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call; an error answer raises its typed `InterlockAPIError`."""
        response = self.http.request(method, path, **kwargs)
        if response.is_error:
            raise from_text(response.status_code, response.text)
        return response.json()

    def stream(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> Iterator[StreamEvent]:
        with self.http.stream("POST", path, json=body, headers={**STREAM, **headers}) as response:
            if response.is_error:
                raise from_text(response.status_code, response.read().decode())
            parser = EventParser(response.status_code)
            for line in response.iter_lines():
                if (event := parser.feed(line)) is not None:
                    yield event

    def chat(self, agent: str, metadata: dict[str, Any] | None = None) -> Chat:
        """Start a chat with an agent."""
        data = self.request("POST", "/v1/chats", json={"agent": agent, "metadata": metadata})
        return Chat(self, data["id"], agent)

    def start(self, agent: str, text: str, *, metadata: dict[str, Any] | None = None,
              max_turns: int | None = None,
              idempotency_key: str | None = None) -> tuple[Chat, TurnResult]:
        """Start a chat with its first message, in one request: the chat, and the turn that
        message ran (its `messages` are the chat's, all of them). Sent again under the same
        `idempotency_key`, it answers that chat as its first turn left it."""
        state = self.request("POST", "/v1/chats",
                             json=start_body(agent, text, metadata, max_turns),
                             headers=key_header(idempotency_key))
        return Chat(self, state["id"], agent), TurnResult.opened(state)

    def open_chat(self, chat_id: str) -> Chat:
        """A handle on an existing chat."""
        return Chat(self, chat_id, self.request("GET", f"/v1/chats/{chat_id}")["agent"])

    def chats(self, **filters: Any) -> dict[str, Any]:
        return dict(self.request("GET", "/v1/chats", params=query(filters)))

    def interrupts(self, **filters: Any) -> Page[InboxItem]:
        found = self.request("GET", "/v1/interrupts", params=query(filters))
        return cast(Page[InboxItem], found)

    def decisions(self, **filters: Any) -> Page[DecisionRecord]:
        found = self.request("GET", "/v1/decisions", params=query(filters))
        return cast(Page[DecisionRecord], found)

    def decision_stats(self, **filters: Any) -> dict[str, Any]:
        return dict(self.request("GET", "/v1/decisions/stats", params=query(filters)))

    def agents(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/v1/agents")["items"])


class Chat:
    """One chat: send, resume, retry, stream, and read its state and events."""

    def __init__(self, client: Client, chat_id: str, agent: str) -> None:
        self.client, self.id, self.agent = client, chat_id, agent
        self.path = f"/v1/chats/{chat_id}"

    def send(self, text: str, *, max_turns: int | None = None) -> TurnResult:
        """Send a message; `max_turns` overrides the agent's tool-round budget for this turn."""
        return TurnResult.parse(
            self.client.request(
                "POST", f"{self.path}/messages", json=message_body(text, max_turns)
            )
        )

    def resume(
        self,
        respond: Sequence[Respond] = (),
        restart: Sequence[Restart] = (),
        idempotency_key: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        max_turns: int | None = None,
    ) -> TurnResult:
        return TurnResult.parse(
            self.client.request(
                "POST",
                f"{self.path}/resume",
                json=resume_body(list(respond), list(restart), metadata, max_turns),
                headers=key_header(idempotency_key),
            )
        )

    def decide(
        self, *decisions: Decision, metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> TurnResult:
        """One resume of any mix: `i.approve()`, `i.edit(x)`, `i.reject(why)`, respond, restart."""
        body = decide_body(list(decisions), metadata)
        return TurnResult.parse(self.client.request(
            "POST", f"{self.path}/resume", json=body, headers=key_header(idempotency_key)))

    def withdraw(self, refs: Sequence[str], reason: str) -> TurnResult:
        """Take pending requests back (the requester or an admin); the model is told why."""
        body = {"refs": list(refs), "reason": reason}
        return TurnResult.parse(self.client.request("POST", f"{self.path}/withdraw", json=body))

    def retry(self) -> TurnResult:
        return TurnResult.parse(self.client.request("POST", f"{self.path}/retry"))

    def stream(self, text: str, *, max_turns: int | None = None) -> Iterator[StreamEvent]:
        return self.client.stream(f"{self.path}/messages", message_body(text, max_turns), {})

    def stream_resume(
        self,
        respond: Sequence[Respond] = (),
        restart: Sequence[Restart] = (),
        idempotency_key: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        max_turns: int | None = None,
    ) -> Iterator[StreamEvent]:
        return self.client.stream(
            f"{self.path}/resume",
            resume_body(list(respond), list(restart), metadata, max_turns),
            key_header(idempotency_key),
        )

    def state(self, version: int | None = None) -> ChatState:
        found = self.client.request("GET", self.path, params=query({"version": version}))
        return cast(ChatState, found)

    def events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        after: str | None = "0"
        while after is not None:
            page = self.client.request("GET", f"{self.path}/events", params={"after": after})
            events.extend(page["events"])
            after = page.get("next_cursor")
        return events
