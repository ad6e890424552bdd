"""`interlock webhooks deliveries|failed|redeliver`: the webhook outbox, for operators."""

from __future__ import annotations

import argparse
import json
from typing import Any

from interlock.bootstrap import service_from
from interlock.domain.errors import ConfigurationError
from interlock.projections import open_views
from interlock.projections.views.webhooks import WebhooksView
from interlock.settings import flag_help as _help
from interlock.settings import load_settings


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("webhooks", help="list and redeliver webhook deliveries",
                              description="Inspect the webhook outbox of a store; queue a "
                              "failed delivery again (a running server sends it).")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in (("deliveries", "every delivery, oldest first"),
                       ("failed", "deliveries that gave up")):
        q = sub.add_parser(name, help=text, description=f"Print {text}, one JSON object a line.")
        _common(q)
        q.add_argument("--limit", type=int, default=500, help="at most this many (500)")
        q.set_defaults(run=_list, status="failed" if name == "failed" else None)
    r = sub.add_parser("redeliver", help="queue a delivery again from its first attempt",
                       description="Queue delivery ID again (same id and body).")
    _common(r)
    r.add_argument("id", help="the delivery id (msg_...)")
    r.set_defaults(run=_redeliver)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help=_help("memory://, sqlite:///path.db or postgresql://...",
                                         "store"))
    p.add_argument("--tenant", help="only this tenant's deliveries")


def _view(args: argparse.Namespace) -> WebhooksView:
    service = service_from(load_settings(store=args.store), with_agents=False)
    return open_views(service).view(WebhooksView)


def _list(args: argparse.Namespace) -> int:
    for delivery in _view(args).deliveries(args.tenant, args.status, args.limit):
        print(json.dumps(delivery.model_dump(mode="json")))
    return 0


def _redeliver(args: argparse.Namespace) -> int:
    if not _view(args).redeliver(args.tenant, args.id):
        raise ConfigurationError(f"no webhook delivery {args.id}")
    print(f"queued {args.id}")
    return 0
