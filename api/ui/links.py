"""The page where a principal, signed in as itself, confirms the Slack link a one-time code
names (docs/notifications.md): the same service method as POST
/v1/channels/slack/links/confirm."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response

from interlock.api.deps import ServiceDep
from interlock.api.jsonbody import JsonRoute
from interlock.api.ui.render import checked_form, render
from interlock.api.ui.router import Visitor
from interlock.domain.errors import AuthError, ConflictError, InvalidRequestError
from interlock.domain.links import Link

router = APIRouter(prefix="/slack-link", route_class=JsonRoute)


def _page(request: Request, service: ServiceDep, who: Visitor, status: int = 200,
          **context: object) -> HTMLResponse:
    mine = [link for link in service.channels.get(who.tenant).links.linked.values()
            if link.principal == who.id]
    return render(request, "slack_link.html", status, who=who, links=mine, **context)


@router.get("", response_class=HTMLResponse)
def slack_link(request: Request, service: ServiceDep, who: Visitor) -> Response:
    return _page(request, service, who)


@router.post("", response_class=HTMLResponse)
async def confirm(request: Request, service: ServiceDep, who: Visitor) -> Response:
    data = await checked_form(request)
    try:
        link: Link = await run_in_threadpool(
            service.channels.confirm_link, who.tenant, data.get("code", ""), confirmer=who.id)
    except (InvalidRequestError, AuthError, ConflictError) as exc:
        return await run_in_threadpool(_page, request, service, who, exc.status,
                                       error=exc.message, code=exc.code)
    return await run_in_threadpool(_page, request, service, who, confirmed=link)
