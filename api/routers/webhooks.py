"""Webhook subscriptions of the caller's tenant, and their deliveries (admins only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import AfterValidator, AnyHttpUrl, BaseModel, ConfigDict, Field

from interlock.api.auth import Principal
from interlock.api.deps import PrincipalDep, ReadModelsDep, ServiceDep
from interlock.api.errors import RouteNotFoundError, ViewsBehindError
from interlock.api.jsonbody import JsonRoute
from interlock.api.routers.common import errors
from interlock.projections.views.webhooks import (
    EVENT_TYPES,
    Delivery,
    DeliveryStatus,
    EventType,
    Subscription,
    WebhooksView,
)
from interlock.webhooks.subscriptions import Subscriptions

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], route_class=JsonRoute)
Id = Annotated[str, Field(min_length=1, max_length=200)]


async def _admin(principal: PrincipalDep) -> Principal:
    principal.require("admin")
    return principal


Admin = Annotated[Principal, Depends(_admin)]


def _view(request: Request) -> WebhooksView:
    view: WebhooksView | None = request.app.state.webhooks
    if view is None:
        raise RouteNotFoundError("webhooks are not enabled on this server")
    return view


View = Annotated[WebhooksView, Depends(_view)]


def _current(view: View, service: ServiceDep, views: ReadModelsDep) -> WebhooksView:
    """The webhooks view once it shows every event committed before this request."""
    try:
        views.wait(service.position(), views=(WebhooksView.view_name,))
    except TimeoutError:
        raise ViewsBehindError() from None
    return view


Current = Annotated[WebhooksView, Depends(_current)]


def _subscriptions(request: Request, view: View) -> Subscriptions:
    found: Subscriptions = request.app.state.subscriptions
    return found


Subs = Annotated[Subscriptions, Depends(_subscriptions)]


MAX_URL = 2000


def _deliverable(url: AnyHttpUrl) -> AnyHttpUrl:
    """A URL a delivery can reach: a DNS-valid host, a real port, no credentials in it."""
    host = url.host or ""
    labels = host.rstrip(".").split(".")
    if len(host) > 253 or any(not 0 < len(label) <= 63 for label in labels):
        raise ValueError("the host is not a valid DNS name (labels of 1 to 63 characters,"
                         " at most 253 in all)")
    if url.port == 0:
        raise ValueError("port 0 cannot be connected to")
    if url.username or url.password:
        raise ValueError("credentials in the URL would be stored and listed: put them in"
                         " the receiver's path or verify the signature instead")
    if len(str(url)) > MAX_URL:
        raise ValueError(f"the URL is longer than {MAX_URL} characters")
    return url


class SubscriptionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: Annotated[AnyHttpUrl, AfterValidator(_deliverable)] = Field(
        description="where to POST; http(s) only, a DNS-valid host, no credentials")
    events: list[EventType] = Field(default=list(EVENT_TYPES), min_length=1)


class SubscriptionList(BaseModel):
    items: list[Subscription]


class DeliveryList(BaseModel):
    items: list[Delivery]


@router.post("", status_code=201, response_model=Subscription, responses=errors())
def create_webhook(body: SubscriptionCreate, subs: Subs, who: Admin) -> Subscription:
    """Subscribe a URL to the tenant's notifications; the `secret` is shown only here."""
    return subs.subscribe(who.tenant, str(body.url), body.url.host or "", list(body.events),
                          who.id)


@router.get("", response_model=SubscriptionList, responses=errors())
def list_webhooks(view: Current, who: Admin) -> SubscriptionList:
    """The tenant's subscriptions (without their secrets)."""
    return SubscriptionList(items=view.subscriptions(who.tenant))


@router.delete("/{subscription_id}", status_code=204, responses=errors(404))
def delete_webhook(subscription_id: str, subs: Subs, who: Admin) -> Response:
    """Remove a subscription and its undelivered notifications."""
    if not subs.unsubscribe(who.tenant, subscription_id, who.id):
        raise RouteNotFoundError(f"no webhook subscription {subscription_id}")
    return Response(status_code=204)


@router.get("/deliveries", response_model=DeliveryList, responses=errors())
def list_deliveries(
    view: Current, who: Admin, status: DeliveryStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> DeliveryList:
    """The tenant's deliveries, oldest first; `status=failed` lists those that gave up."""
    return DeliveryList(items=view.deliveries(who.tenant, status, limit))


@router.post("/deliveries/{delivery_id}/redeliver", status_code=202, responses=errors(404))
def redeliver(delivery_id: str, view: View, who: Admin) -> Response:
    """Queue a delivery again, from its first attempt, with the same id and body."""
    if not view.redeliver(who.tenant, delivery_id):
        raise RouteNotFoundError(f"no webhook delivery {delivery_id}")
    return Response(status_code=202)
