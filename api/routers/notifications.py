"""Notification channels of the caller's tenant (admins), and Slack's interactive callbacks
(signed by Slack, not by an API key)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from interlock.api.auth import Principal
from interlock.api.deps import PrincipalDep, ServiceDep
from interlock.api.errors import RouteNotFoundError
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.domain.channels import ChannelKind, Channels, EmailChannel, SlackChannel
from interlock.domain.links import SLACK_USER, Link, LinkRequest
from interlock.notify.slack_actions import SlackActions

router = APIRouter(tags=["notifications"], route_class=JsonRoute)


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


class LinkProposal(BaseModel):
    """A proposed link and its one-time code: shown once, to be confirmed by `principal`."""

    code: str
    slack_user: str
    principal: str
    proposed_by: str
    expires_at: datetime


class LinkConfirm(BaseModel):
    code: str = Field(min_length=1, max_length=64, description="the one-time code")


class LinkList(BaseModel):
    items: list[Link]
    unconfirmed: dict[str, str] = Field(
        description="an admin's mapping of old (Slack user -> principal): it counts for nobody "
        "until each principal confirms a link (shown to admins)")


def _listed(channels: Channels) -> ChannelList:
    return ChannelList(items=[ChannelPublic(
        kind=k, config={n: v for n, v in c.items() if n != "users"}, set_by=channels.set_by[k])
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


@router.post("/v1/channels/slack/links", status_code=201, response_model=LinkProposal,
             responses=errors(409))
async def propose_link(body: LinkRequest, service: ServiceDep,
                       who: PrincipalDep) -> LinkProposal:
    """Propose that a Slack user count as you (or, an admin, as `principal`): the one-time
    code its principal confirms within ten minutes. Nothing counts before that."""
    code, proposal = await run_in_threadpool(
        service.propose_link, who.tenant, body.slack_user, principal=body.principal,
        proposer=who.decider())
    assert proposal.principal is not None  # a proposal made over the API names its principal
    return LinkProposal(code=code, slack_user=proposal.slack_user, principal=proposal.principal,
                        proposed_by=proposal.proposed_by, expires_at=proposal.expires_at)


@router.post("/v1/channels/slack/links/confirm", response_model=Link, responses=errors(409))
async def confirm_link(body: LinkConfirm, service: ServiceDep, who: PrincipalDep) -> Link:
    """Confirm, as yourself, the link a code names: from now its Slack user's votes are yours."""
    return await run_in_threadpool(service.confirm_link, who.tenant, body.code,
                                   confirmer=who.id)


@router.get("/v1/channels/slack/links", response_model=LinkList, responses=errors())
def list_links(service: ServiceDep, who: PrincipalDep) -> LinkList:
    """The confirmed links: all of the tenant's for an admin, your own otherwise."""
    channels = service.get_channels(who.tenant)
    admin = "admin" in who.roles
    links = [link for link in channels.links.linked.values()
             if admin or link.principal == who.id]
    return LinkList(items=sorted(links, key=lambda link: link.slack_user),
                    unconfirmed=channels.unconfirmed if admin else {})


@router.delete("/v1/channels/slack/links/{slack_user}", status_code=204,
               responses=errors(404, 409))
async def remove_link(slack_user: Annotated[str, Path(pattern=SLACK_USER)], service: ServiceDep,
                      who: PrincipalDep) -> Response:
    """Remove a link (an admin, or its principal): its Slack user counts as nobody."""
    removed = await run_in_threadpool(service.unlink, who.tenant, slack_user, who=who.decider())
    if not removed:
        raise RouteNotFoundError(f"the Slack user {slack_user} is linked to nobody")
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
