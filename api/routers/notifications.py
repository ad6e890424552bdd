"""Notification channels of the caller's tenant (admins): one `PUT /v1/channels/{kind}` per
channel the registry lists (interlock/notify/channels), with that channel's body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import AfterValidator, BaseModel, WithJsonSchema
from pydantic_core import PydanticCustomError

from interlock.api.auth import Principal
from interlock.api.deps import PrincipalDep, ServiceDep
from interlock.api.errors import RouteNotFoundError
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.domain.channels import Channels
from interlock.notify.channels.port import ChannelType
from interlock.notify.channels.registry import CHANNELS, KINDS

router = APIRouter(tags=["notifications"], route_class=JsonRoute)


async def _admin(principal: PrincipalDep) -> Principal:
    principal.require("admin")
    return principal


Admin = Annotated[Principal, Depends(_admin)]


def _known(kind: str) -> str:
    """A registered channel's kind, refused as a `Literal` of them would be."""
    if kind not in KINDS:
        expected = " or ".join(repr(k) for k in KINDS)
        raise PydanticCustomError("literal_error", "Input should be {expected}",
                                  {"expected": expected})
    return kind


# The kinds as a `Literal` of them would show (the path's schema and the model's differ in
# their keys' order only).
KindParam = Annotated[str, AfterValidator(_known),
                      WithJsonSchema({"enum": list(KINDS), "type": "string"})]
Kind = Annotated[str, AfterValidator(_known),
                 WithJsonSchema({"type": "string", "enum": list(KINDS)})]


class ChannelPublic(BaseModel):
    kind: Kind
    config: dict[str, Any]
    set_by: str


class ChannelList(BaseModel):
    items: list[ChannelPublic]


def _listed(channels: Channels) -> ChannelList:
    return ChannelList(items=[ChannelPublic(
        kind=k, config={n: v for n, v in c.items() if n != "users"}, set_by=channels.set_by[k])
        for k, c in sorted(channels.configured.items())])


@router.get("/v1/channels", response_model=ChannelList, responses=errors())
def list_channels(service: ServiceDep, who: Admin) -> ChannelList:
    """The tenant's channels as recorded (who set each)."""
    return _listed(service.channels.get(who.tenant))


def _setter(channel: ChannelType) -> Callable[..., Awaitable[ChannelList]]:
    """`PUT /v1/channels/{kind}` for one channel: its body is the channel's config."""

    async def set_channel(body: Any, service: ServiceDep, who: Admin) -> ChannelList:
        return _listed(await run_in_threadpool(
            service.channels.set, who.tenant, channel.kind, body, actor=who.id))

    set_channel.__annotations__["body"] = channel.config  # FastAPI reads the body's model here
    return set_channel


for _channel in CHANNELS:
    router.add_api_route(f"/v1/channels/{_channel.kind}", _setter(_channel), methods=["PUT"],
                         name=f"set_{_channel.kind}", description=_channel.summary,
                         response_model=ChannelList, responses=errors(409))


@router.delete("/v1/channels/{kind}", status_code=204, responses=errors(404, 409))
async def remove_channel(kind: KindParam, service: ServiceDep, who: Admin) -> Response:
    removed = await run_in_threadpool(service.channels.remove, who.tenant, kind, actor=who.id)
    if not removed:
        raise RouteNotFoundError(f"the tenant has no {kind} channel")
    return Response(status_code=204)


