"""`interlock serve`: run HTTP API v1 with uvicorn, one or several worker processes."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from interlock.api.observability.logs import configure_logging
from interlock.bootstrap import check_serving
from interlock.cli import listeners
from interlock.settings import Settings, load_settings
from interlock.settings import flag_help as _help
from interlock.slowclients import protocol_class

FACTORY = "interlock.bootstrap:create_app"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve", help="run the HTTP API",
        description="Run HTTP API v1 with the read models kept current in each process. "
        "Flags override INTERLOCK_* variables; INTERLOCK_SECRET and INTERLOCK_API_KEYS may "
        "also be files interlock_secret and interlock_api_keys in INTERLOCK_SECRETS_DIR "
        "(default /run/secrets). Without API keys the server runs in dev mode, loopback only.",
        epilog="example: interlock serve --store postgresql://app@db/interlock --keys keys.toml "
        "--host 0.0.0.0 --workers 4   (like: uvicorn --factory " + FACTORY
        + " with INTERLOCK_* set, whose workers share one listening socket)",
    )
    p.add_argument("--agents", help=_help("module:attribute holding a list of Agent", "agents"))
    p.add_argument("--store", help=_help("memory://, sqlite:///path.db or "
                                         "postgresql://user@host/db", "store"))
    p.add_argument("--host", help=_help("bind address", "host"))
    p.add_argument("--port", type=int, help=_help("port; 0 picks a free one", "port"))
    p.add_argument("--workers", type=int,
                   help=_help("server processes sharing the store (on Linux each listens on "
                              "a socket of its own, so connections spread evenly)", "workers"))
    p.add_argument("--keys", type=Path, dest="api_keys_file",
                   help=_help("API keys file, JSON or TOML, mapping key -> {id, tenant, roles}; "
                              "or JSON text in INTERLOCK_API_KEYS", "api_keys_file"))
    p.add_argument("--dev-principals", metavar="NAMES",
                   help=_help("dev mode: principals to act as, name[:role...] comma-separated "
                              "(the API takes the name as its key, the console a picker)",
                              "dev_principals"))
    p.add_argument("--log-format", choices=["text", "json"],
                   help=_help("log lines as text or one JSON object each", "log_format"))
    p.add_argument("--allow-dev-secret", action="store_true", default=None,
                   help=_help("serve with API keys but without INTERLOCK_SECRET (development)",
                              "allow_dev_secret"))
    p.add_argument("--read-timeout", type=float,
                   help=_help("seconds a client has to send a whole request", "read_timeout"))
    p.add_argument("--keep-alive-timeout", type=float,
                   help=_help("seconds an idle connection stays open", "keep_alive_timeout"))
    p.add_argument("--limit-concurrency", type=int,
                   help=_help("connections and tasks per worker before answering 503",
                              "limit_concurrency"))
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(agents=args.agents, store=args.store, host=args.host,
                             port=args.port, workers=args.workers,
                             api_keys_file=args.api_keys_file, log_format=args.log_format,
                             dev_principals=args.dev_principals,
                             allow_dev_secret=args.allow_dev_secret,
                             read_timeout=args.read_timeout,
                             keep_alive_timeout=args.keep_alive_timeout,
                             limit_concurrency=args.limit_concurrency)
    configure_logging(settings.log_format)
    check_serving(settings)  # one clear line and exit 2, before any worker starts
    # Every process, this one included, builds the app from the environment: one path.
    os.environ.update(settings.to_env())
    options: dict[str, Any] = {
        "factory": True, "host": settings.host, "port": settings.port,
        "workers": settings.workers, "access_log": False, "log_level": "info",
        "log_config": None,  # our handler (configure_logging) formats uvicorn's lines too
        **uvicorn_options(settings)}
    if settings.workers > 1 and listeners.supported():
        return run_workers(settings, options)
    uvicorn.run(FACTORY, **options)
    return 0


def run_workers(settings: Settings, options: dict[str, Any]) -> int:
    """Several workers, each listening on a socket of its own (`listeners`)."""
    try:
        sock = listeners.reserve(settings.host, settings.port)
    except OSError as exc:
        print(f"interlock serve: cannot listen on {settings.host}:{settings.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    config = uvicorn.Config(listeners.FACTORY, **options)
    host, port = settings.host, sock.getsockname()[1]
    logging.getLogger("uvicorn.error").info(  # the line uvicorn writes (scripts wait for it)
        "Uvicorn running on http://%s:%d (Press CTRL+C to quit)",
        f"[{host}]" if ":" in host else host, port)
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()
    return 0


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """Limits against slow or too many clients (each worker also reads read_timeout)."""
    return {"http": protocol_class(), "timeout_keep_alive": settings.keep_alive_timeout,
            "limit_concurrency": settings.limit_concurrency}
