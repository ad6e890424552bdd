"""Agent Protocol (LangGraph's threads, runs, interrupts) under `/agent-protocol`, over the
same service, keys, tenants and rules as `/v1`: a thread is a chat, a run is a turn, an
interrupt is a pending call, and `Command(resume=...)` is a respond or an approval vote.
Where the protocol and Interlock's rules differ, the rule wins and the error says why."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from interlock.api.agent_protocol import mapping
from interlock.api.deps import Reader, Requester, ServiceDep
from interlock.api.routers.common import errors
from interlock.domain import Agent, Chat, Interlock, RespondEntry
from interlock.domain.chat.canonical import wire_time
from interlock.domain.errors import InvalidRequestError, ModelError, NotFoundError
from interlock.domain.results import TurnResult

router = APIRouter(prefix="/agent-protocol", tags=["agent-protocol"])
ThreadId = Annotated[UUID, "the thread's (chat's) id"]
RunId = Annotated[str, Path(max_length=36, description="a run's id (a turn's end)")]
STARTED = wire_time(datetime.now(UTC))  # agents are code: they exist since the process


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")  # the protocol's options Interlock has no use for


class AssistantSearch(_Body):
    graph_id: str | None = Field(default=None, max_length=200)
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class ThreadCreate(_Body):
    metadata: dict[str, Any] | None = None
    thread_id: str | None = Field(default=None, description="refused: Interlock makes ids")


class ThreadHistory(_Body):
    limit: int = Field(default=10, ge=1, le=100)


class Command(_Body):
    resume: Any = None


class RunCreate(_Body):
    assistant_id: str | None = Field(default=None, max_length=200)
    input: dict[str, Any] | None = None
    command: Command | None = None


class AssistantNotFoundError(NotFoundError):
    code = "assistant_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"no assistant {name!r}: assistants are the server's agents", name=name)


def _assistant(agent: Agent) -> dict[str, Any]:
    return {"assistant_id": agent.name, "graph_id": agent.name, "name": agent.name,
            "description": agent.description, "config": {}, "context": {},
            "metadata": {"fingerprint": agent.fingerprint}, "version": 1,
            "created_at": STARTED, "updated_at": STARTED}


@router.post("/assistants/search", responses=errors())
def search_assistants(body: AssistantSearch, service: ServiceDep, who: Reader) -> list[Any]:
    """The server's agents as assistants (an assistant is an agent: code, not data)."""
    found = [a for a in service.agents.values() if body.graph_id in (None, a.name)]
    return [_assistant(a) for a in found[body.offset:body.offset + body.limit]]


@router.get("/assistants/{assistant_id}", responses=errors(404))
def get_assistant(assistant_id: Annotated[str, Path(max_length=200)], service: ServiceDep,
                  who: Reader) -> dict[str, Any]:
    if assistant_id not in service.agents:
        raise AssistantNotFoundError(assistant_id)
    return _assistant(service.agents[assistant_id])


def _agent_for(service: Interlock, metadata: dict[str, Any]) -> str:
    named = metadata.get("graph_id") or metadata.get("assistant_id")
    if isinstance(named, str):
        if named not in service.agents:
            raise AssistantNotFoundError(named)
        return named
    if len(service.agents) == 1:
        return next(iter(service.agents))
    raise InvalidRequestError(
        "a thread is a chat with one agent: name it in metadata.graph_id", field="metadata")


@router.post("/threads", responses=errors())
async def create_thread(body: ThreadCreate, service: ServiceDep,
                        who: Requester) -> dict[str, Any]:
    """A new thread: a chat with the agent `metadata.graph_id` names (or the only one)."""
    if body.thread_id is not None:
        raise InvalidRequestError("thread ids are made by Interlock: leave thread_id out",
                                  field="thread_id")
    metadata = body.metadata or {}
    agent = _agent_for(service, metadata)
    chat = await service.off_loop(service.start_chat, agent, actor=who.id, tenant=who.tenant,
                                  metadata=metadata)
    return mapping.thread(chat)


@router.get("/threads/{thread_id}", responses=errors(404))
def get_thread(thread_id: ThreadId, service: ServiceDep, who: Reader) -> dict[str, Any]:
    return mapping.thread(service.get_chat(thread_id, tenant=who.tenant))


@router.get("/threads/{thread_id}/state", responses=errors(404))
def get_state(thread_id: ThreadId, service: ServiceDep, who: Reader) -> dict[str, Any]:
    """The thread's state now; its checkpoint id is the chat's version."""
    return mapping.state(service.get_chat(thread_id, tenant=who.tenant))


@router.get("/threads/{thread_id}/state/{checkpoint_id}", responses=errors(404))
def get_state_at(thread_id: ThreadId,
                 checkpoint_id: Annotated[int, Path(ge=1, le=2**31 - 1, description="a version")],
                 service: ServiceDep, who: Reader) -> dict[str, Any]:
    """The thread's state as of a checkpoint (a version): a replay of its log."""
    return mapping.state(service.get_chat(thread_id, version=checkpoint_id, tenant=who.tenant))


@router.post("/threads/{thread_id}/history", responses=errors(404))
def history(thread_id: ThreadId, body: ThreadHistory, service: ServiceDep,
            who: Reader) -> list[Any]:
    """The thread's states at the end of each turn, newest first (the chat's log replayed)."""
    events = service.chat_events(thread_id, tenant=who.tenant)
    ends = [e.originator_version for e in events if type(e).__name__ == "TurnFinished"]
    latest = events[-1].originator_version if events else 1
    versions = sorted({*ends, latest}, reverse=True)[:body.limit]
    parents = [*versions[1:], None]
    return [mapping.state(service.get_chat(thread_id, version=v, tenant=who.tenant), parent)
            for v, parent in zip(versions, parents, strict=True)]


async def _run(thread_id: UUID, body: RunCreate, service: Interlock, who: Any) -> Chat:
    """Run the turn the body asks for: a user message (input) or decisions (command)."""
    chat = await service.off_loop(service.get_chat, thread_id, tenant=who.tenant)
    if body.assistant_id not in (None, chat.state.agent):
        raise InvalidRequestError(
            f"thread {thread_id} is a chat with {chat.state.agent}; Interlock keeps one agent "
            "per chat", field="assistant_id", agent=chat.state.agent)
    if (body.input is None) == (body.command is None):
        raise InvalidRequestError("a run takes either input or command (resume)", field="input")
    result: TurnResult
    if body.input is not None:
        who.require("requester")
        result = await service.send(thread_id, mapping.user_text(body.input), actor=who.id,
                                    tenant=who.tenant)
    else:
        assert body.command is not None
        entries = mapping.resume_entries(chat, body.command.resume)
        respond = [e for e in entries if isinstance(e, RespondEntry)]
        votes = [e for e in entries if not isinstance(e, RespondEntry)]
        result = await service.resume(thread_id, respond=respond, votes=votes, actor=who.id,
                                      tenant=who.tenant, decider=who.decider())
    if result.finish_reason == "failed":
        raise ModelError(result.error or "the model failed", chat_id=result.chat_id,
                         version=result.version, finish_reason="failed")
    return await service.off_loop(service.get_chat, thread_id, tenant=who.tenant)


def _run_public(chat: Chat) -> dict[str, Any]:
    status = {"interrupted": "interrupted", "failed": "error"}.get(chat.state.status, "success")
    when = wire_time(chat.state.updated_at)
    return {"run_id": mapping.run_id(chat.id, chat.version), "thread_id": str(chat.id),
            "assistant_id": chat.state.agent, "created_at": when, "updated_at": when,
            "status": status, "metadata": {"version": chat.version},
            "multitask_strategy": "reject"}


def _outcome(chat: Chat) -> dict[str, Any]:
    values = mapping.values(chat)
    pending = mapping.interrupts(chat)
    return {**values, "__interrupt__": pending} if pending else values


@router.post("/threads/{thread_id}/runs/wait", responses=errors(404, 409, 502))
async def run_wait(thread_id: ThreadId, body: RunCreate, service: ServiceDep,
                   who: Reader) -> dict[str, Any]:
    """Run a turn and answer the thread's values (with `__interrupt__` when it paused)."""
    return _outcome(await _run(thread_id, body, service, who))


@router.post("/threads/{thread_id}/runs", responses=errors(404, 409, 502))
async def run_create(thread_id: ThreadId, body: RunCreate, service: ServiceDep,
                     who: Reader) -> dict[str, Any]:
    """Run a turn; it has ended when this answers (Interlock runs no background runs)."""
    return _run_public(await _run(thread_id, body, service, who))


def _run_of(chat: Chat, run_id: str) -> int:
    for version in range(chat.version, 0, -1):
        if mapping.run_id(chat.id, version) == run_id:
            return version
    raise NotFoundError(f"no run {run_id} in thread {chat.id}", run_id=run_id)


@router.get("/threads/{thread_id}/runs/{run_id}", responses=errors(404))
def get_run(thread_id: ThreadId, run_id: RunId, service: ServiceDep,
            who: Reader) -> dict[str, Any]:
    chat = service.get_chat(thread_id, tenant=who.tenant)
    return _run_public(service.get_chat(thread_id, version=_run_of(chat, run_id)))


@router.get("/threads/{thread_id}/runs/{run_id}/join", responses=errors(404))
def join_run(thread_id: ThreadId, run_id: RunId, service: ServiceDep,
             who: Reader) -> dict[str, Any]:
    """The thread's values once the run ended (runs end before they answer)."""
    chat = service.get_chat(thread_id, tenant=who.tenant)
    return _outcome(service.get_chat(thread_id, version=_run_of(chat, run_id)))


@router.post("/threads/{thread_id}/runs/stream", responses=errors(404, 409, 502))
async def run_stream(thread_id: ThreadId, body: RunCreate, service: ServiceDep,
                     who: Reader) -> StreamingResponse:
    """Run a turn and stream `metadata` then `values` as Server-Sent Events."""
    chat = await _run(thread_id, body, service, who)

    async def events() -> AsyncIterator[str]:
        meta = {"run_id": mapping.run_id(chat.id, chat.version), "attempt": 1}
        yield f"event: metadata\ndata: {json.dumps(meta)}\n\n"
        yield f"event: values\ndata: {json.dumps(_outcome(chat), ensure_ascii=False)}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
