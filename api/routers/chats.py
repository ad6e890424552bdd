"""Chats: create, list, read (now or as of a version), send, resume, retry, event log."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from interlock.api.auth import Principal
from interlock.api.deps import (
    CurrentViews,
    Reader,
    Requester,
    ServiceDep,
    StreamsDep,
    service_of,
    streams_of,
)
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import STREAMED, answer_turn, errors
from interlock.api.schemas import (
    MAX_EVENTS,
    MAX_LIMIT,
    ChatCreate,
    ChatEvents,
    ChatPublic,
    EventPublic,
    ForkRequest,
    MessageCreate,
    ResumeRequest,
    TurnPublic,
    WithdrawRequest,
)
from interlock.api.streaming import Turn
from interlock.domain import Interlock
from interlock.domain.chat.ids import id_text
from interlock.domain.delegations import DelegationDesk
from interlock.domain.errors import InvalidRequestError, ModelError
from interlock.domain.results import TurnResult
from interlock.domain.runtime.turns import Emit
from interlock.projections.interface import ChatFilter, ChatSummary, Page

router = APIRouter(prefix="/v1/chats", tags=["chats"], route_class=JsonRoute)
ChatId = Annotated[UUID, "the chat's id"]
IdempotencyKey = Annotated[
    str | None, Header(alias="Idempotency-Key", min_length=1, max_length=200)
]


@router.post("", status_code=201, response_model=ChatPublic, responses=errors(409, 502))
async def create_chat(body: ChatCreate, request: Request, who: Requester,
                      idempotency_key: IdempotencyKey = None) -> ChatPublic:
    """A new chat with `agent`. With `text`, its first message too: the turn runs, and the
    chat is answered as the turn left it (`interrupts` pending, `finish_reason`), one
    request instead of two; sent again under the same `Idempotency-Key`, it answers that
    chat as its first turn left it (a turn a store failure cut is continued). The first turn
    is answered as JSON: to stream it, create the chat, then send its message with
    `Accept: text/event-stream`."""
    return await start_chat(service_of(request), body, who, idempotency_key)


async def start_chat(service: Interlock, body: ChatCreate, who: Principal,
                     idempotency_key: str | None = None) -> ChatPublic:
    """What `POST /v1/chats` does (`interlock.api.hot` serves it too); with `text`, the
    chat's first message and its turn too (a failed turn is a 502, as `send_message`'s)."""
    if body.text is None:
        if idempotency_key is not None:
            raise InvalidRequestError(
                "Idempotency-Key on POST /v1/chats needs text: a chat created alone has no"
                " turn to answer again (send the key with the chat's first message)",
                parameter="Idempotency-Key")
        chat = await service.off_loop(
            service.start_chat, body.agent, actor=who.id, tenant=who.tenant,
            metadata=body.metadata)
        return ChatPublic.of(chat)
    chat = await service.open_chat(body.agent, body.text, actor=who.id, tenant=who.tenant,
                                   metadata=body.metadata, max_turns=body.max_turns,
                                   idempotency_key=idempotency_key)
    if chat.state.finish_reason == "failed":
        raise ModelError(chat.state.error or "the model failed", chat_id=id_text(chat.id),
                         version=chat.version, finish_reason="failed")
    return ChatPublic.of(chat)


@router.get("", response_model=Page[ChatSummary], responses=errors())
def list_chats(
    views: CurrentViews, who: Reader,
    status: Literal["idle", "running", "interrupted", "failed"] | None = None,
    agent: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
) -> Page[ChatSummary]:
    """Chat summaries of the caller's tenant, newest activity first."""
    return views.chats(ChatFilter(tenant=who.tenant, status=status, agent=agent), limit, cursor)


@router.get("/{chat_id}", response_model=ChatPublic, responses=errors(404))
def get_chat(
    chat_id: ChatId, service: ServiceDep, who: Reader,
    version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> ChatPublic:
    """The chat now, or as of event `version`."""
    return ChatPublic.of(service.get_chat(chat_id, version=version, tenant=who.tenant))


@router.post("/{chat_id}/fork", status_code=201, response_model=ChatPublic,
             responses=errors(404, 409))
async def fork_chat(
    chat_id: ChatId, body: ForkRequest, service: ServiceDep, who: Requester
) -> ChatPublic:
    """A new chat holding this chat's history up to `version`, linked both ways; the
    interrupts pending there are pending in the fork, nothing decided after it is."""
    fork = await service.off_loop(service.fork, chat_id, body.version, actor=who.id,
                                  tenant=who.tenant, agent=body.agent)
    return ChatPublic.of(fork)


@router.get("/{chat_id}/events", response_model=ChatEvents, responses=errors(404))
def chat_events(
    chat_id: ChatId, service: ServiceDep, who: Reader,
    after: Annotated[int, Query(ge=0, le=2**62, description="a page's next_cursor")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_EVENTS)] = MAX_EVENTS,
) -> ChatEvents:
    """The chat's event log, the audit trail, oldest first, `limit` events per page."""
    events = service.chat_events(chat_id, tenant=who.tenant, after=after, limit=limit + 1)
    more = len(events) > limit
    page = [EventPublic.of(e) for e in events[:limit]]
    return ChatEvents(chat_id=str(chat_id), events=page,
                      next_cursor=str(page[-1].version) if more else None)


@router.post("/{chat_id}/messages", response_model=TurnPublic,
             responses={**STREAMED, **errors(404, 409, 502)})
async def send_message(
    chat_id: ChatId, body: MessageCreate, request: Request, who: Requester,
) -> TurnPublic | StreamingResponse:
    """Send a user message and run the turn until it stops or interrupts."""
    return await answer_turn(request, send_turn(service_of(request), chat_id, body, who),
                             streams_of(request), who.tenant)


def send_turn(service: Interlock, chat_id: UUID, body: MessageCreate, who: Principal) -> Turn:
    """The turn `POST /v1/chats/{chat_id}/messages` runs (`interlock.api.hot` runs it too)."""
    return lambda emit: service.send(
        chat_id, body.text, actor=who.id, tenant=who.tenant, emit=emit,
        max_turns=body.max_turns)


@router.post("/{chat_id}/resume", response_model=TurnPublic,
             responses={**STREAMED, **errors(404, 409, 502)})
async def resume(
    chat_id: ChatId, body: ResumeRequest, request: Request, who: Reader,
    idempotency_key: IdempotencyKey = None,
) -> TurnPublic | StreamingResponse:
    """Decide pending interrupts, all or nothing, and continue the turn.

    `respond`/`restart` decide a tool's own interrupts (the `approver` role); `approve`,
    `edit` and `reject` vote on calls held by an approval policy (whoever it names).
    """
    turn = resume_turn(service_of(request), chat_id, body, who, idempotency_key)
    return await answer_turn(request, turn, streams_of(request), who.tenant)


def resume_turn(
    service: Interlock, chat_id: UUID, body: ResumeRequest, who: Principal,
    idempotency_key: str | None,
) -> Turn:
    """The turn `POST /v1/chats/{chat_id}/resume` runs (`interlock.api.hot` runs it too);
    with a `delegation`, its votes are cast for the delegator (checked when it runs)."""
    async def turn(emit: Emit | None) -> TurnResult:
        decider = who.decider()
        if body.delegation is not None:
            decider = await service.off_loop(DelegationDesk(service).acting, who.tenant,
                                             body.delegation, decider)
        return await service.resume(
            chat_id, respond=body.respond, restart=body.restart, actor=who.id,
            tenant=who.tenant, emit=emit, idempotency_key=idempotency_key,
            metadata=body.metadata, max_turns=body.max_turns,
            votes=[*body.approve, *body.edit, *body.reject], decider=decider)
    return turn


@router.post("/{chat_id}/withdraw", response_model=TurnPublic,
             responses={**STREAMED, **errors(404, 409, 502)})
async def withdraw(
    chat_id: ChatId, body: WithdrawRequest, request: Request, service: ServiceDep,
    streams: StreamsDep, who: Reader,
) -> TurnPublic | StreamingResponse:
    """Withdraw pending requests (requester or admin); the model is told, the chat goes on."""
    return await answer_turn(request, lambda emit: service.withdraw(
        chat_id, body.refs, reason=body.reason, decider=who.decider(), tenant=who.tenant,
        emit=emit), streams, who.tenant)


@router.post("/{chat_id}/retry", response_model=TurnPublic,
             responses={**STREAMED, **errors(404, 409, 502)})
async def retry(
    chat_id: ChatId, request: Request, service: ServiceDep, streams: StreamsDep,
    who: Reader,
) -> TurnPublic | StreamingResponse:
    """Continue a failed turn (or one whose lease expired) from its last recorded step.

    A requester may retry any turn of the tenant; an approver only one their decision started.
    """
    decider_only = not ({"requester", "admin"} & who.roles)
    if decider_only:
        who.require("approver")
    return await answer_turn(request, lambda emit: service.retry(
        chat_id, actor=who.id, tenant=who.tenant, emit=emit, decider_only=decider_only),
        streams, who.tenant)
