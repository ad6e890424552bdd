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

from fastapi import APIRouter, Path, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from interlock.api.agent_protocol import mapping
from interlock.api.deps import Reader, Requester, ServiceDep
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.domain import Agent, Chat, Interlock, RespondEntry
from interlock.domain.chat.canonical import wire_time
from interlock.domain.delegations import DelegationDesk
from interlock.domain.errors import (
    ChatNotFoundError,
    InvalidRequestError,
    ModelError,
    NotFoundError,
)
from interlock.domain.results import TurnResult
from interlock.domain.threads import Reservation

router = APIRouter(prefix="/agent-protocol", tags=["agent-protocol"], route_class=JsonRoute)
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


class Command(_Body):
    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCreate(_Body):
    assistant_id: str | None = Field(default=None, max_length=200)
    input: dict[str, Any] | None = None
    command: Command | None = None
    stream_mode: str | list[str] | None = Field(default=None, description="values, updates, "
                                                "messages (messages-tuple); default values")
    interrupt_before: Any = Field(default=None, description="refused: policies hold calls")
    interrupt_after: Any = Field(default=None, description="refused: policies hold calls")
    config: dict[str, Any] | None = Field(default=None, description="only `configurable."
                                          "delegation` is read: as `delegation`")
    delegation: UUID | None = Field(default=None, description="a resume's votes are cast for "
                                    "its delegator, by this delegation of yours (as /v1's "
                                    "resume `delegation`); or config.configurable.delegation")

    def delegation_named(self) -> UUID | None:
        """The delegation the run votes by: `delegation`, or the LangGraph SDK's
        `config={"configurable": {"delegation": ...}}` (both: they must agree)."""
        configurable = (self.config or {}).get("configurable")
        given = configurable.get("delegation") if isinstance(configurable, dict) else None
        if given is None:
            return self.delegation
        try:
            named = UUID(str(given))
        except ValueError:
            raise InvalidRequestError("config.configurable.delegation is a delegation's id",
                                      field="config") from None
        if self.delegation is not None and self.delegation != named:
            raise InvalidRequestError("delegation and config.configurable.delegation differ",
                                      field="delegation")
        return named


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


def _agent_named(service: Interlock, named: Any) -> str | None:
    """The agent a thread's metadata or a run's `assistant_id` names (the only one if there
    is one and none is named); None when several are served and none is named."""
    if isinstance(named, str):
        if named not in service.agents:
            raise AssistantNotFoundError(named)
        return named
    return next(iter(service.agents)) if len(service.agents) == 1 else None


@router.post("/threads", responses=errors())
async def create_thread(body: ThreadCreate, service: ServiceDep,
                        who: Requester) -> dict[str, Any]:
    """A new thread: a chat with the agent `metadata.graph_id` names (or the only one); with no
    agent named, a reserved thread whose first run names its agent (domain/threads.py)."""
    if body.thread_id is not None:
        raise InvalidRequestError("thread ids are made by Interlock: leave thread_id out",
                                  field="thread_id")
    metadata = body.metadata or {}
    agent = _agent_named(service, metadata.get("graph_id") or metadata.get("assistant_id"))
    if agent is not None:
        chat = await service.off_loop(service.start_chat, agent, actor=who.id,
                                      tenant=who.tenant, metadata=metadata)
        return mapping.thread(chat)
    if metadata:
        raise InvalidRequestError(
            "a thread with no agent keeps no metadata: metadata is recorded in the chat, which "
            "its first run begins; name the agent in metadata.graph_id to keep metadata",
            field="metadata")
    reserved = await service.off_loop(service.threads.reserve, actor=who.id, tenant=who.tenant)
    return mapping.reserved_thread(reserved)


Thread = Chat | Reservation


def _thread(service: Interlock, thread_id: UUID, tenant: str) -> Thread:
    """The thread's chat, or its reservation while no run has begun the chat."""
    try:
        return service.get_chat(thread_id, tenant=tenant)
    except ChatNotFoundError:
        reserved = service.threads.get(thread_id, tenant=tenant)
        if reserved is None:
            raise
        return reserved


@router.get("/threads/{thread_id}", responses=errors(404))
def get_thread(thread_id: ThreadId, service: ServiceDep, who: Reader) -> dict[str, Any]:
    found = _thread(service, thread_id, who.tenant)
    return mapping.thread(found) if isinstance(found, Chat) else mapping.reserved_thread(found)


def _state(found: Thread) -> dict[str, Any]:
    return mapping.state(found) if isinstance(found, Chat) else mapping.reserved_state(found)


@router.get("/threads/{thread_id}/state", responses=errors(404))
def get_state(thread_id: ThreadId, service: ServiceDep, who: Reader) -> dict[str, Any]:
    """The thread's state now; its checkpoint id is the chat's version."""
    return _state(_thread(service, thread_id, who.tenant))


@router.post("/threads/{thread_id}/state", responses=errors(404))
def update_state(thread_id: ThreadId, service: ServiceDep, who: Reader) -> dict[str, Any]:
    """Refused: a thread's state is its chat's event log (LangGraph's `update_state`)."""
    _thread(service, thread_id, who.tenant)  # another tenant's thread does not exist
    raise InvalidRequestError(
        "update_state is refused: a thread's state is its chat's event log, which only a run "
        "(a user's message) or a decision (Command(resume=...)) adds to; nothing is "
        "rewritten", field="values", rule="state_is_the_event_log")


class CheckpointRef(_Body):
    checkpoint_id: str | None = Field(default=None, max_length=40)
    checkpoint_ns: str = Field(default="", max_length=200)


class StateAt(_Body):
    checkpoint: CheckpointRef


def _version(ref: CheckpointRef | None) -> int | None:
    """A checkpoint's version; None for the thread's latest."""
    if ref is None or ref.checkpoint_id is None:
        return None
    if ref.checkpoint_ns:
        raise InvalidRequestError(
            "a thread has one namespace, '': Interlock runs no subgraphs of its own",
            field="checkpoint.checkpoint_ns")
    if not ref.checkpoint_id.isdigit() or not 1 <= int(ref.checkpoint_id) < 2**31:
        raise InvalidRequestError(
            "checkpoint_id is a chat version: the checkpoint_id of one of the thread's states",
            field="checkpoint.checkpoint_id")
    return int(ref.checkpoint_id)


@router.post("/threads/{thread_id}/state/checkpoint", responses=errors(404))
def get_state_at_checkpoint(thread_id: ThreadId, body: StateAt, service: ServiceDep,
                            who: Reader) -> dict[str, Any]:
    """The thread's state at a checkpoint (LangGraph's `get_state` with a config); the latest
    when the checkpoint names no `checkpoint_id`."""
    version = _version(body.checkpoint)
    if version is None:
        return _state(_thread(service, thread_id, who.tenant))
    return mapping.state(service.get_chat(thread_id, version=version, tenant=who.tenant))


@router.get("/threads/{thread_id}/state/{checkpoint_id}", responses=errors(404))
def get_state_at(thread_id: ThreadId,
                 checkpoint_id: Annotated[int, Path(ge=1, le=2**31 - 1, description="a version")],
                 service: ServiceDep, who: Reader) -> dict[str, Any]:
    """The thread's state as of a checkpoint (a version): a replay of its log."""
    return mapping.state(service.get_chat(thread_id, version=checkpoint_id, tenant=who.tenant))


class ThreadHistory(_Body):
    limit: int = Field(default=10, ge=1, le=100)
    before: CheckpointRef | None = None
    metadata: dict[str, Any] | None = None


@router.post("/threads/{thread_id}/history", response_model=list[Any], responses=errors(404))
def history(thread_id: ThreadId, body: ThreadHistory, service: ServiceDep,
            who: Reader) -> Response:
    """The thread's states at the end of each turn, newest first (the chat's log replayed);
    `before` a checkpoint, those older than it. A reserved thread has none yet.

    A page holds at most `limit` states and at most INTERLOCK_HISTORY_BYTES of them (at
    least one): each state is a whole one, as LangGraph's clients read it, so a page stops
    before the state that would pass the budget; ask on with `before` its last checkpoint.
    Only the states on the page are replayed."""
    if isinstance(_thread(service, thread_id, who.tenant), Reservation):
        return _json_list([])
    versions = _turn_ends(service, thread_id, who.tenant, _version(body.before))
    parents = [*versions[1:], None][:len(versions)]  # none before the first checkpoint
    wanted = body.metadata or {}
    page: list[bytes] = []
    size, budget = 2, service.limits.history_bytes
    for version, parent in zip(versions, parents, strict=True):
        state = mapping.state(service.get_chat(thread_id, version=version, tenant=who.tenant),
                              parent)
        if any(state["metadata"].get(k) != v for k, v in wanted.items()):
            continue
        encoded = _encode(state)
        size += len(encoded) + 1
        if page and size > budget:
            break
        page.append(encoded)
        if len(page) == body.limit:
            break
    return _json_list(page)


def _turn_ends(service: Interlock, thread_id: UUID, tenant: str, before: int | None) -> list[int]:
    """The versions a thread's states are at (each turn's end, and its latest), newest first."""
    events = service.chat_events(thread_id, tenant=tenant)
    ends = [e.originator_version for e in events if type(e).__name__ == "TurnFinished"]
    latest = events[-1].originator_version if events else 1
    versions = sorted({*ends, latest}, reverse=True)
    return versions if before is None else [v for v in versions if v < before]


def _encode(value: Any) -> bytes:
    """JSON as FastAPI's JSONResponse writes it."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _json_list(items: list[bytes]) -> Response:
    return Response(b"[" + b",".join(items) + b"]", media_type="application/json")


STREAM_MODES = ("values", "updates", "messages", "messages-tuple")


def _modes(body: RunCreate) -> list[str]:
    """The stream modes asked for (values by default); one Interlock cannot serve is refused."""
    asked = body.stream_mode or ["values"]
    modes = [asked] if isinstance(asked, str) else asked
    refused = [m for m in modes if m not in STREAM_MODES]
    if refused:
        raise InvalidRequestError(
            f"stream_mode {', '.join(map(repr, refused))} is not served: Interlock records a "
            "turn's messages and decisions, not the steps of a graph, and streams values, "
            "updates and messages (messages-tuple)", field="stream_mode", refused=refused)
    return modes


def _check_run(body: RunCreate) -> str | None:
    """What a run asks that Interlock refuses, before anything is written; the user's text."""
    if (body.input is None) == (body.command is None):
        raise InvalidRequestError("a run takes either input or command (resume)", field="input")
    for name in ("interrupt_before", "interrupt_after"):
        if getattr(body, name):
            raise InvalidRequestError(
                f"{name} is not served: a call pauses where an approval policy or a tool's "
                "own interrupt holds it, not before or after a node", field=name)
    if body.input is not None and body.delegation_named() is not None:
        raise InvalidRequestError("a delegation goes with a resume (command), not with input",
                                  field="delegation")
    if body.command is not None and (body.command.update is not None or body.command.goto):
        raise InvalidRequestError(
            "Command(update=..., goto=...) is refused: a thread's state is its chat's event "
            "log, which only decisions change; resume with Command(resume=...)",
            field="command", rule="state_is_the_event_log")
    return None if body.input is None else mapping.user_text(body.input)


async def _begin(service: Interlock, found: Thread, body: RunCreate, text: str | None,
                 who: Any) -> Chat:
    """The chat a run runs in: the thread's, or begun by this run with its assistant."""
    if isinstance(found, Chat):
        if body.assistant_id not in (None, found.state.agent):
            raise InvalidRequestError(
                f"thread {found.id} is a chat with {found.state.agent}; Interlock keeps one "
                "agent per chat", field="assistant_id", agent=found.state.agent)
        return found
    if text is None:
        raise InvalidRequestError(
            f"thread {found.thread_id} has no run yet: there is nothing to resume; send input",
            field="command")
    agent = _agent_named(service, body.assistant_id)
    if agent is None:
        raise InvalidRequestError("name the run's assistant_id: it becomes the thread's agent",
                                  field="assistant_id")
    who.require("requester")
    return await service.off_loop(service.threads.start_chat, found.thread_id, agent,
                                  actor=who.id, tenant=who.tenant)


async def _run(chat: Chat, body: RunCreate, text: str | None, service: Interlock,
               who: Any) -> Chat:
    """Run the turn the body asks for: a user message (input) or decisions (command)."""
    result: TurnResult
    if text is not None:
        who.require("requester")
        result = await service.send(chat.id, text, actor=who.id, tenant=who.tenant)
    else:
        assert body.command is not None
        entries = mapping.resume_entries(chat, body.command.resume)
        respond = [e for e in entries if isinstance(e, RespondEntry)]
        votes = [e for e in entries if not isinstance(e, RespondEntry)]
        decider, delegation = who.decider(), body.delegation_named()
        if delegation is not None:  # as /v1's resume: the delegation's rules decide
            decider = await service.off_loop(DelegationDesk(service).acting, who.tenant,
                                             delegation, decider)
        result = await service.resume(chat.id, respond=respond, votes=votes, actor=who.id,
                                      tenant=who.tenant, decider=decider)
    if result.finish_reason == "failed":
        raise ModelError(result.error or "the model failed", chat_id=result.chat_id,
                         version=result.version, finish_reason="failed")
    return await service.off_loop(service.get_chat, chat.id, tenant=who.tenant)


class _Ran:
    """A run that ended: the chat after it, and how many messages the thread had before."""

    def __init__(self, chat: Chat, since: int) -> None:
        self.chat, self.since = chat, since

    @property
    def run_id(self) -> str:
        return mapping.run_id(self.chat.id, self.chat.version)

    @property
    def location(self) -> dict[str, str]:
        """Where the run is (LangGraph's clients read the thread and run ids from it)."""
        return {"Content-Location":
                f"/agent-protocol/threads/{self.chat.id}/runs/{self.run_id}"}


async def _thread_run(thread_id: UUID, body: RunCreate, service: Interlock, who: Any) -> _Ran:
    text = _check_run(body)
    found = await service.off_loop(_thread, service, thread_id, who.tenant)
    chat = await _begin(service, found, body, text, who)
    since = len(mapping.messages(chat))
    return _Ran(await _run(chat, body, text, service, who), since)


async def _stateless_run(body: RunCreate, service: Interlock, who: Any) -> _Ran:
    """A run without a thread: it begins a chat of its own, which stays (the log keeps it)."""
    text = _check_run(body)
    if text is None:
        raise InvalidRequestError(
            "a run without a thread resumes nothing: resume on the thread of the interrupt",
            field="command")
    agent = _agent_named(service, body.assistant_id)
    if agent is None:
        raise InvalidRequestError("name the run's assistant_id", field="assistant_id")
    who.require("requester")
    chat = await service.off_loop(service.start_chat, agent, actor=who.id, tenant=who.tenant)
    return _Ran(await _run(chat, body, text, service, who), 0)


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


def _streamed(ran: _Ran, modes: list[str]) -> StreamingResponse:
    """The run as Server-Sent Events: `metadata`, then per new message `messages` and
    `updates` (node `model` or `tools`), the pending interrupts as an `updates` of
    `__interrupt__`, and the thread's `values` at the end, as the modes ask."""
    chat = ran.chat
    meta = {"run_id": ran.run_id, "thread_id": str(chat.id), "attempt": 1}
    parts: list[tuple[str, Any]] = [("metadata", meta)]
    for message in mapping.messages(chat)[ran.since:]:
        node = {"ai": "model", "tool": "tools"}.get(message["type"])
        if node is None:
            continue  # the run's own input
        if "messages" in modes or "messages-tuple" in modes:
            parts.append(("messages", [message, {**meta, "langgraph_node": node}]))
        if "updates" in modes:
            parts.append(("updates", {node: {"messages": [message]}}))
    pending = mapping.interrupts(chat)
    if pending and "updates" in modes:
        parts.append(("updates", {"__interrupt__": pending}))
    if "values" in modes:
        parts.append(("values", _outcome(chat)))

    async def events() -> AsyncIterator[str]:
        for event, data in parts:
            yield f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers=ran.location)


@router.post("/threads/{thread_id}/runs/wait", responses=errors(404, 409, 502))
async def run_wait(thread_id: ThreadId, body: RunCreate, service: ServiceDep,
                   who: Reader, response: Response) -> dict[str, Any]:
    """Run a turn and answer the thread's values (with `__interrupt__` when it paused)."""
    ran = await _thread_run(thread_id, body, service, who)
    response.headers.update(ran.location)
    return _outcome(ran.chat)


@router.post("/threads/{thread_id}/runs", responses=errors(404, 409, 502))
async def run_create(thread_id: ThreadId, body: RunCreate, service: ServiceDep,
                     who: Reader, response: Response) -> dict[str, Any]:
    """Run a turn; it has ended when this answers (Interlock runs no background runs)."""
    ran = await _thread_run(thread_id, body, service, who)
    response.headers.update(ran.location)
    return _run_public(ran.chat)


@router.post("/threads/{thread_id}/runs/stream", responses=errors(404, 409, 502))
async def run_stream(thread_id: ThreadId, body: RunCreate, service: ServiceDep,
                     who: Reader) -> StreamingResponse:
    """Run a turn and stream it as Server-Sent Events (stream modes values, updates,
    messages)."""
    modes = _modes(body)
    return _streamed(await _thread_run(thread_id, body, service, who), modes)


@router.post("/runs/wait", responses=errors(404, 409, 502))
async def stateless_run_wait(body: RunCreate, service: ServiceDep,
                             who: Reader, response: Response) -> dict[str, Any]:
    """A run without a thread: a new chat with `assistant_id`; its values, and its thread in
    the `Content-Location` header."""
    ran = await _stateless_run(body, service, who)
    response.headers.update(ran.location)
    return _outcome(ran.chat)


@router.post("/runs", responses=errors(404, 409, 502))
async def stateless_run_create(body: RunCreate, service: ServiceDep,
                               who: Reader, response: Response) -> dict[str, Any]:
    """A run without a thread: a new chat with `assistant_id`; the run (its `thread_id`)."""
    ran = await _stateless_run(body, service, who)
    response.headers.update(ran.location)
    return _run_public(ran.chat)


@router.post("/runs/stream", responses=errors(404, 409, 502))
async def stateless_run_stream(body: RunCreate, service: ServiceDep,
                               who: Reader) -> StreamingResponse:
    """A run without a thread, streamed (its `metadata` names the new thread)."""
    modes = _modes(body)
    return _streamed(await _stateless_run(body, service, who), modes)


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
