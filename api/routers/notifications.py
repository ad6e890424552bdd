"""Notification channels of the caller's tenant (admins), and Slack's interactive callbacks
(signed by Slack, not by an API key)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel

from interlock.api.auth import Principal
from interlock.api.deps import PrincipalDep, ServiceDep
from interlock.api.errors import RouteNotFoundError
from interlock.api.routers.common import errors
from interlock.domain.channels import ChannelKind, Channels, EmailChannel, SlackChannel
from interlock.notify.slack_actions import SlackActions

router = APIRouter(tags=["notifications"])


async def _admin(principal: PrincipalDep) -> Principal:
    principal.require("admin")
    return principal


Admin = Annotated[Principal, Depends(_admin)]


class ChannelPublic(BaseModel):
    kind: ChannelKind
    config: dict[str, Any]
    set_by: str


class ChannelList(BaseModel):
    items: list[ChannelPublic]


def _listed(channels: Channels) -> ChannelList:
    return ChannelList(items=[ChannelPublic(kind=k, config=c, set_by=channels.set_by[k])
                              for k, c in sorted(channels.configured.items())])


@router.get("/v1/channels", response_model=ChannelList, responses=errors())
def list_channels(service: ServiceDep, who: Admin) -> ChannelList:
    """The tenant's channels as recorded (who set each)."""
    return _listed(service.get_channels(who.tenant))


@router.put("/v1/channels/email", response_model=ChannelList, responses=errors(409))
async def set_email(body: EmailChannel, service: ServiceDep, who: Admin) -> ChannelList:
    """Mail held calls to the routed principals with an address here (an event records it)."""
    return _listed(await run_in_threadpool(
        service.set_channel, who.tenant, "email", body, actor=who.id))


@router.put("/v1/channels/slack", response_model=ChannelList, responses=errors(409))
async def set_slack(body: SlackChannel, service: ServiceDep, who: Admin) -> ChannelList:
    """Message held calls to the routed principals' Slack users, and take their votes."""
    return _listed(await run_in_threadpool(
        service.set_channel, who.tenant, "slack", body, actor=who.id))


@router.delete("/v1/channels/{kind}", status_code=204, responses=errors(404, 409))
async def remove_channel(kind: ChannelKind, service: ServiceDep, who: Admin) -> Response:
    removed = await run_in_threadpool(service.remove_channel, who.tenant, kind, actor=who.id)
    if not removed:
        raise RouteNotFoundError(f"the tenant has no {kind} channel")
    return Response(status_code=204)


@router.post("/v1/integrations/slack/actions", responses=errors())
async def slack_actions(
    request: Request,
    timestamp: Annotated[str | None, Header(alias="X-Slack-Request-Timestamp")] = None,
    signature: Annotated[str | None, Header(alias="X-Slack-Signature")] = None,
) -> dict[str, Any]:
    """A button or form of a Slack message: verified, then recorded as the mapped principal."""
    actions: SlackActions | None = getattr(request.app.state, "slack_actions", None)
    if actions is None:
        raise RouteNotFoundError("Slack is not configured on this server")
    body = await request.body()
    payload = await run_in_threadpool(actions.verify, body, timestamp, signature)
    return await actions.handle(payload)
