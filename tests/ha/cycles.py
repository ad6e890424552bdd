"""Approval cycles under load, as issue 47 asks for them: each client creates a chat, sends it
a request (the agent asks for approval: the turn ends interrupted), approves it (the agent
then pays, a side effect counted per idempotency key in tests/faults/agents.py's RUNS, and
answers). A cycle is acknowledged when its approval is answered 200 with the turn finished.

A request refused (503 during a failover) leaves its cycle where it stopped and the client
starts a new one, as tests/faults/load.py's clients do: the check below holds for whatever
was acknowledged, whichever step the fault cut.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel

from interlock.domain import (
    Agent,
    FunctionModel,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ToolContext,
    ToolRequest,
    tool,
)
from tests.faults.agents import AGENTS as PAYERS
from tests.faults.agents import MODEL_SECONDS, RUNS, pay
from tests.faults.load import Answer, Load

AGENT = "approvedPayer"
STEPS = ("create", "send", "approve")  # Answer.what of a cycle's three requests


class Ask(BaseModel):
    amount: int


class Approved(BaseModel):
    approved: bool


@tool(name="askApproval", description="Ask a person to approve the payment.",
      side_effects=False, interrupts=True)
async def ask_approval(input: Ask, ctx: ToolContext) -> Approved:
    ctx.interrupt({"reason": "payment", "amount": input.amount})


def _reply(part: Part) -> ModelResponse:
    return ModelResponse(message=Message(role="model", content=[part]))


async def _model(request: ModelRequest) -> ModelResponse:
    await asyncio.sleep(MODEL_SECONDS)
    last = request.messages[-1]
    if last.role == "user":
        return _reply(Part(tool_request=ToolRequest(name="askApproval", input={"amount": 5})))
    response = last.content[-1].tool_response
    assert response is not None
    if response.name == "askApproval":
        return _reply(Part(tool_request=ToolRequest(name="pay", input={"amount": 5})))
    return _reply(Part(text="paid"))


# tests/faults/agents.py's payer too: a test may still drive plain turns (tests.faults.load)
AGENTS = [*PAYERS, Agent(name=AGENT, system="Pay once approved.", tools=[ask_approval, pay],
                         model=FunctionModel(_model))]


@dataclass
class CycleLoad(Load):
    """`clients` threads doing approval cycles until `stop()`; answers as Load records them
    (`what` is one of STEPS). What a client thread could not record as an answer (a
    transport error, a turn answered 200 that did not finish as the step must) goes to
    `failures`, so that it fails the check rather than end the thread unseen."""

    failures: list[str] = field(default_factory=list)

    def _client(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while not self._stopping.is_set():
                try:
                    done = self._cycle(http)
                except (httpx.HTTPError, ValueError, KeyError) as error:
                    with self._lock:
                        self.failures.append(f"{type(error).__name__}: {error}")
                    done = False
                if not done:
                    time.sleep(0.05)  # as a client honouring Retry-After would, only shorter

    def _cycle(self, http: httpx.Client) -> bool:
        chat = self._step(http, "create", "/v1/chats", {"agent": AGENT}, None)
        if chat is None:
            return False
        sent = self._step(http, "send", f"/v1/chats/{chat}/messages", {"text": "pay"}, chat)
        if sent is None:
            return False
        [held] = sent["interrupts"]
        respond = {"respond": [{"ref": held["ref"], "name": held["name"],
                                "output": {"approved": True}}]}
        return self._step(http, "approve", f"/v1/chats/{chat}/resume", respond, chat) is not None

    def _step(self, http: httpx.Client, what: str, path: str, body: dict[str, Any],
              chat: str | None) -> Any:
        """One request, recorded; its JSON body if it succeeded (a chat's id for create)."""
        started = time.monotonic()
        reply = http.post(path, json=body)
        ended = time.monotonic()
        data = reply.json()
        ok = reply.status_code < 300
        code = data.get("error", {}).get("code") if not ok else None
        if what == "create" and ok:
            chat = data["id"]
        if ok and what != "create":
            expected = "interrupted" if what == "send" else "stop"
            if data["finish_reason"] != expected:
                with self._lock:
                    self.failures.append(f"{what} {chat} answered 200 but {data}")
                return None
        with self._lock:
            self.answers.append(Answer(what, reply.status_code, code,
                                       reply.headers.get("retry-after"), started, ended, chat))
        if not ok:
            return None
        return chat if what == "create" else data


def acknowledged(load: Load, what: str = "approve") -> list[Answer]:
    """The answers of `what` that succeeded, in the order they were recorded."""
    return [a for a in list(load.answers) if a.what == what and a.status < 300]


def check_nothing_lost_nothing_twice(url: str, load: CycleLoad) -> None:
    """Every acknowledged step's events are in the store (a created chat exists, a sent
    request's interrupt or what followed it, an approved cycle's payment and answer); every
    side effect ran once, and only in a turn an approval started; no client met anything
    but an answer."""
    assert load.failures == [], load.failures[:5]
    assert RUNS and max(RUNS.values()) == 1, RUNS
    paid = {key.split(":")[0] for key in RUNS}
    with httpx.Client(base_url=url, timeout=10) as http:
        for answer in load.answers:
            if answer.status >= 300:
                continue
            chat = http.get(f"/v1/chats/{answer.chat}")
            assert chat.status_code == 200, answer
            if answer.what == "send":
                state = chat.json()
                assert state["status"] in ("interrupted", "running", "failed", "idle"), state
                assert state["status"] != "idle" or answer.chat in paid, state
            if answer.what == "approve":
                state = chat.json()
                assert state["status"] == "idle" and state["finish_reason"] == "stop", state
                assert answer.chat in paid
                tools = [p["toolResponse"]["name"] for m in state["messages"]
                         for p in m["content"] if p.get("toolResponse")]
                assert tools == ["askApproval", "pay"], tools
    # a payment runs only in a turn that an approval request started
    assert paid <= {a.chat for a in load.answers if a.what == "approve"}, paid
