"""Slack's own routes: the identity links a principal confirms (domain/links.py), and Slack's
interactive callbacks (signed by Slack, not by an API key; interlock/notify/slack_actions.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from interlock.api.deps import PrincipalDep, ServiceDep
from interlock.api.errors import RouteNotFoundError
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.domain.links import SLACK_USER, Link, LinkRequest
from interlock.notify.channels.port import Callbacks
from interlock.notify.slack_actions import SIGNATURE_HEADER, TIMESTAMP_HEADER

router = APIRouter(tags=["notifications"], route_class=JsonRoute)


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


@router.post("/v1/channels/slack/links", status_code=201, response_model=LinkProposal,
             responses=errors(409))
async def propose_link(body: LinkRequest, service: ServiceDep,
                       who: PrincipalDep) -> LinkProposal:
    """Propose that a Slack user count as you (or, an admin, as `principal`): the one-time
    code its principal confirms within ten minutes. Nothing counts before that."""
    code, proposal = await run_in_threadpool(
        service.channels.propose_link, who.tenant, body.slack_user, principal=body.principal,
        proposer=who.decider())
    assert proposal.principal is not None  # a proposal made over the API names its principal
    return LinkProposal(code=code, slack_user=proposal.slack_user, principal=proposal.principal,
                        proposed_by=proposal.proposed_by, expires_at=proposal.expires_at)


@router.post("/v1/channels/slack/links/confirm", response_model=Link, responses=errors(409))
async def confirm_link(body: LinkConfirm, service: ServiceDep, who: PrincipalDep) -> Link:
    """Confirm, as yourself, the link a code names: from now its Slack user's votes are yours."""
    return await run_in_threadpool(service.channels.confirm_link, who.tenant, body.code,
                                   confirmer=who.id)


@router.get("/v1/channels/slack/links", response_model=LinkList, responses=errors())
def list_links(service: ServiceDep, who: PrincipalDep) -> LinkList:
    """The confirmed links: all of the tenant's for an admin, your own otherwise."""
    channels = service.channels.get(who.tenant)
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
    removed = await run_in_threadpool(service.channels.unlink, who.tenant, slack_user,
                                      who=who.decider())
    if not removed:
        raise RouteNotFoundError(f"the Slack user {slack_user} is linked to nobody")
    return Response(status_code=204)


@router.post("/v1/integrations/slack/actions", responses=errors())
async def slack_actions(
    request: Request,
    timestamp: Annotated[str | None, Header(alias=TIMESTAMP_HEADER)] = None,
    signature: Annotated[str | None, Header(alias=SIGNATURE_HEADER)] = None,
) -> dict[str, Any]:
    """A button or form of a Slack message: verified, then recorded as the mapped principal."""
    callbacks: dict[str, Callbacks] = getattr(request.app.state, "callbacks", {})
    actions = callbacks.get("slack")
    if actions is None:
        raise RouteNotFoundError("Slack is not configured on this server")
    body = await request.body()
    signed = {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature}
    payload = await run_in_threadpool(
        actions.verify, body, {k: v for k, v in signed.items() if v is not None})
    return await actions.handle(payload)
