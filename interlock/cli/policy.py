"""`interlock policy list|data-what-if`: a tenant's data policies, and a version run against
the calls recorded before anyone approves it (docs/approvals.md, "Policies as data"). The
`policy` command is interlock/cli/replay_test.py's (its `what-if` judges code policies)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from interlock.api.auth import load_auth
from interlock.api.routers.policies import recent_chats, roles_by_id
from interlock.bootstrap import service_from
from interlock.domain.policy_book import PolicyDesk
from interlock.domain.policy_whatif import what_if
from interlock.projections import open_views
from interlock.settings import flag_help, load_settings


def register(sub: Any) -> None:
    """Add `list` and `data-what-if` to the `policy` command's actions."""
    listing = _common(sub.add_parser("list", help="a tenant's data policy versions, one JSON "
                                                  "line each"))
    listing.set_defaults(run=_list)
    w = _common(sub.add_parser(
        "data-what-if", help="run a data policy version against the recorded calls",
        description="For each recorded call of the version's tool: would it be held, through "
        "which stages, would its recorded votes pass; and the counts (as POST "
        "/v1/policies/{id}/versions/{n}/what-if). Only reads the store."))
    w.add_argument("policy", help="the policy id")
    w.add_argument("--version", type=int, help="the version (default: the latest)")
    w.add_argument("--chats", type=int, default=200,
                   help="read the tool's calls in the agent's last CHATS chats (200)")
    w.add_argument("--keys", type=Path, help="the server's API keys file: count only votes "
                                             "by principals whose keys hold a deciding role")
    w.set_defaults(run=_what_if)


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--store", help=flag_help("memory://, sqlite:///path.db or postgresql://...",
                                             "store"))
    p.add_argument("--tenant", required=True, help="the tenant whose policies to read")
    return p


def _list(args: argparse.Namespace) -> int:
    service = service_from(load_settings(store=args.store), with_agents=False)
    try:
        for version in PolicyDesk(service).load(args.tenant).all_versions():
            print(json.dumps(version.model_dump(mode="json"), ensure_ascii=False))
    finally:
        service.close()
    return 0


def _what_if(args: argparse.Namespace) -> int:
    service = service_from(load_settings(store=args.store))
    views = open_views(service)
    try:
        views.catch_up()
        version = args.version or PolicyDesk(service).load(args.tenant).get(args.policy).version
        roles = roles_by_id(load_auth(args.keys), args.tenant) if args.keys else None
        result = what_if(service, args.tenant, args.policy, version,
                         lambda agent: recent_chats(views, args.tenant, agent, args.chats),
                         roles)
        print(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
    finally:
        views.close()
        service.close()
    return 0
