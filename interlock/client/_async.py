"""The asynchronous client: `AsyncClient` and `AsyncChat`, the same calls awaited."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
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


class AsyncClient:
    """Talks to one Interlock server with one API key, from asyncio code."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = http or httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, *exc: type[BaseException] | BaseException | TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self.http.request(method, path, **kwargs)
        if response.is_error:
            raise from_text(response.status_code, response.text)
        return response.json()

    async def stream(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> AsyncIterator[StreamEvent]:
        async with self.http.stream(
            "POST", path, json=body, headers={**STREAM, **headers}
        ) as response:
            if response.is_error:
                raise from_text(response.status_code, (await response.aread()).decode())
            parser = EventParser(response.status_code)
            async for line in response.aiter_lines():
                if (event := parser.feed(line)) is not None:
                    yield event

    async def chat(self, agent: str, metadata: dict[str, Any] | None = None) -> AsyncChat:
        data = await self.request("POST", "/v1/chats", json={"agent": agent, "metadata": metadata})
        return AsyncChat(self, data["id"], agent)

    async def start(self, agent: str, text: str, *, metadata: dict[str, Any] | None = None,
                    max_turns: int | None = None,
                    idempotency_key: str | None = None) -> tuple[AsyncChat, TurnResult]:
        """Start a chat with its first message, in one request: the chat, and the turn that
        message ran (its `messages` are the chat's, all of them). Sent again under the same
        `idempotency_key`, it answers that chat as its first turn left it."""
        state = await self.request("POST", "/v1/chats",
                                   json=start_body(agent, text, metadata, max_turns),
                                   headers=key_header(idempotency_key))
        return AsyncChat(self, state["id"], agent), TurnResult.opened(state)

    async def open_chat(self, chat_id: str) -> AsyncChat:
        data = await self.request("GET", f"/v1/chats/{chat_id}")
        return AsyncChat(self, chat_id, data["agent"])

    async def interrupts(self, **filters: Any) -> Page[InboxItem]:
        found = await self.request("GET", "/v1/interrupts", params=query(filters))
        return cast(Page[InboxItem], found)

    async def decisions(self, **filters: Any) -> Page[DecisionRecord]:
        found = await self.request("GET", "/v1/decisions", params=query(filters))
        return cast(Page[DecisionRecord], found)

    async def agents(self) -> list[dict[str, Any]]:
        return list((await self.request("GET", "/v1/agents"))["items"])


class AsyncChat:
    def __init__(self, client: AsyncClient, chat_id: str, agent: str) -> None:
        self.client, self.id, self.agent = client, chat_id, agent
        self.path = f"/v1/chats/{chat_id}"

    async def send(self, text: str, *, max_turns: int | None = None) -> TurnResult:
        """Send a message; `max_turns` overrides the agent's tool-round budget for this turn."""
        return TurnResult.parse(
            await self.client.request(
                "POST", f"{self.path}/messages", json=message_body(text, max_turns)
            )
        )

    async def resume(
        self,
        respond: Sequence[Respond] = (),
        restart: Sequence[Restart] = (),
        idempotency_key: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        max_turns: int | None = None,
    ) -> TurnResult:
        return TurnResult.parse(
            await self.client.request(
                "POST",
                f"{self.path}/resume",
                json=resume_body(list(respond), list(restart), metadata, max_turns),
                headers=key_header(idempotency_key),
            )
        )

    async def decide(
        self, *decisions: Decision, metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> TurnResult:
        """One resume of any mix: `i.approve()`, `i.edit(x)`, `i.reject(why)`, respond, restart."""
        body = decide_body(list(decisions), metadata)
        return TurnResult.parse(await self.client.request(
            "POST", f"{self.path}/resume", json=body, headers=key_header(idempotency_key)))

    async def withdraw(self, refs: Sequence[str], reason: str) -> TurnResult:
        """Take pending requests back (the requester or an admin); the model is told why."""
        body = {"refs": list(refs), "reason": reason}
        path = f"{self.path}/withdraw"
        return TurnResult.parse(await self.client.request("POST", path, json=body))

    async def retry(self) -> TurnResult:
        return TurnResult.parse(await self.client.request("POST", f"{self.path}/retry"))

    def stream(self, text: str, *, max_turns: int | None = None) -> AsyncIterator[StreamEvent]:
        return self.client.stream(f"{self.path}/messages", message_body(text, max_turns), {})

    def stream_resume(
        self,
        respond: Sequence[Respond] = (),
        restart: Sequence[Restart] = (),
        idempotency_key: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        max_turns: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        return self.client.stream(
            f"{self.path}/resume",
            resume_body(list(respond), list(restart), metadata, max_turns),
            key_header(idempotency_key),
        )

    async def state(self, version: int | None = None) -> ChatState:
        found = await self.client.request("GET", self.path, params=query({"version": version}))
        return cast(ChatState, found)

    async def events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        after: str | None = "0"
        while after is not None:
            page = await self.client.request("GET", f"{self.path}/events", params={"after": after})
            events.extend(page["events"])
            after = page.get("next_cursor")
        return events
