"""`interlock serve`: run HTTP API v1 with uvicorn (settings from flags or INTERLOCK_* env)."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import uvicorn

from interlock.api.app import create_app
from interlock.api.auth import AuthConfig, is_loopback, load_auth
from interlock.domain import Agent, Interlock
from interlock.domain.errors import InvalidRequestError
from interlock.domain.models import Model
from interlock.projections import open_read_models

DEFAULTS = {
    "agents": ("INTERLOCK_AGENTS", "interlock.examples.banking:AGENTS"),
    "store": ("INTERLOCK_STORE", "sqlite:///interlock.db"),
    "host": ("INTERLOCK_HOST", "127.0.0.1"),
    "port": ("INTERLOCK_PORT", "8000"),
    "keys": ("INTERLOCK_KEYS", ""),
}


def _default(name: str) -> str:
    env, fallback = DEFAULTS[name]
    return os.environ.get(env, fallback)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve", help="run the HTTP API",
        description="Run HTTP API v1 with the read models in the same process. Flags override "
        "INTERLOCK_* variables. Without API keys the server runs in dev mode, loopback only.",
        epilog="example: interlock serve --store postgresql://app@db/interlock --keys keys.toml "
        "--host 0.0.0.0",
    )
    p.add_argument("--agents", default=_default("agents"),
                   help="module:attribute holding a list of Agent (INTERLOCK_AGENTS; "
                   "default: %(default)s)")
    p.add_argument("--store", default=_default("store"),
                   help="memory://, sqlite:///path.db or postgresql://user@host/db "
                   "(INTERLOCK_STORE; default: %(default)s)")
    p.add_argument("--host", default=_default("host"),
                   help="bind address (INTERLOCK_HOST; default: %(default)s)")
    p.add_argument("--port", type=int, default=_default("port"),
                   help="port; 0 picks a free one (INTERLOCK_PORT; default: %(default)s)")
    p.add_argument("--keys", default=_default("keys") or None,
                   help="API keys file, JSON or TOML, mapping key -> {id, tenant, roles} "
                   "(INTERLOCK_KEYS; or JSON in INTERLOCK_API_KEYS)")
    p.set_defaults(run=run)


def load_agents(spec: str) -> list[Agent]:
    """`module:attribute` naming an Agent or a sequence of them."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InvalidRequestError(f"--agents must look like module:attribute, not {spec!r}")
    found = getattr(importlib.import_module(module_name), attr)
    agents = [found] if isinstance(found, Agent) else list(found)
    if not agents or not all(isinstance(a, Agent) for a in agents):
        raise InvalidRequestError(f"{spec} is not an Agent or a sequence of Agents")
    return agents


def model_resolver() -> Callable[[str], Model] | None:
    """Provider strings ("openai:gpt-4.1-mini") resolve when the providers package is present."""
    try:
        from interlock.providers import resolve_model
    except ImportError:
        return None
    return resolve_model


def check_exposure(host: str, auth: AuthConfig) -> None:
    """Dev mode (no keys) is a single-user mode: refuse to serve it beyond loopback."""
    if auth.dev_mode and not is_loopback(host):
        raise InvalidRequestError(
            f"refusing to serve {host} without API keys: pass --keys FILE or set "
            "INTERLOCK_API_KEYS, or bind 127.0.0.1 for dev mode")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        auth = load_auth(args.keys)
        check_exposure(args.host, auth)
        service = Interlock(load_agents(args.agents), store=args.store,
                            resolve_model=model_resolver())
    except (InvalidRequestError, OSError, ImportError) as exc:
        print(f"interlock serve: {exc}", file=sys.stderr)
        return 2
    views = open_read_models(service, args.store)
    try:
        uvicorn.run(create_app(service, views, auth), host=args.host, port=args.port,
                    access_log=False, log_level="info")
    finally:
        views.close()
    return 0

