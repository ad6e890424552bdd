"""The one place that wires Interlock: store URL → service → read models → HTTP app."""

from __future__ import annotations

import hmac
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

from fastapi import FastAPI
from pydantic import SecretStr

from interlock.api.app import enable_tracing, make_app
from interlock.api.auth import AuthConfig, is_loopback, load_auth
from interlock.api.dev_principals import dev_auth
from interlock.api.observability.logs import configure_logging
from interlock.audit import rotation
from interlock.audit.signing import Signer
from interlock.domain import Agent, Interlock
from interlock.domain.application import DEV_SECRET
from interlock.domain.errors import ConfigurationError, InvalidRequestError
from interlock.domain.limits import Limits
from interlock.domain.runtime.models import Model
from interlock.domain.storage.keys import Keyring
from interlock.notify.channels.registry import CHANNELS
from interlock.notify.config import NotifyConfig
from interlock.notify.gauges import NotifyGauges
from interlock.notify.notifier import Notifier
from interlock.process import tune_gc
from interlock.projections import open_read_models
from interlock.projections.backends.replicas import open_replicas
from interlock.settings import Settings, load_settings
from interlock.stores.console_sessions import open_sessions
from interlock.stores.erasure_keys import KeyStore
from interlock.stores.postgres import store_guard
from interlock.stores.snapshots import open_snapshots
from interlock.stores.urls import store_env
from interlock.sweeper import Sweeper
from interlock.webhooks import DeliveryPolicy

log = logging.getLogger("interlock")
MIN_SECRET_BYTES = 32  # the chain's HMAC key: SHA-256's block of randomness, not a password


def build_service(
    store: str,
    agents: Sequence[Agent] = (),
    *,
    secret: bytes | Keyring | None = None,
    resolve_model: Callable[[str], Model] | None = None,
    deadline: float | None = None,
) -> Interlock:
    """The application service on the store a URL names; `deadline`: the seconds a store
    call may wait for PostgreSQL (then StoreUnavailableError, a 503)."""
    env = store_env(store, deadline)
    if secret is None and not store.startswith("memory"):
        log.warning(
            "INTERLOCK_SECRET is not set: the event chain is keyed with the public "
            "dev secret, so it proves nothing against someone who can write the store"
        )
    service = Interlock(agents, env=env, secret=secret, resolve_model=resolve_model)
    service.limits = Limits()  # its own fork counts; service_from applies the settings'
    service.snapshot_store = open_snapshots(service)
    rotation.attach(service)  # a retired key seals nothing past its rotation checkpoint
    return service


def service_from(settings: Settings, *, with_agents: bool = True) -> Interlock:
    """The service `settings` describe; without agents for tools that only read the log.

    Personal data is stored encrypted under a key per chat, so that it can be erased
    (docs/audit.md, "Erasure"); every process reading the store needs the key store.
    """
    agents = load_agents(settings.agents) if with_agents else []
    service = build_service(settings.store, agents, secret=settings.keyring(),
                            resolve_model=model_resolver(), deadline=settings.store_deadline)
    service.protect_personal_data(KeyStore.open(service))
    service.limits = settings.limits()
    return service


def auth_from(settings: Settings) -> AuthConfig:
    """API keys from INTERLOCK_API_KEYS_FILE, else INTERLOCK_API_KEYS, else dev mode."""
    keys = settings.api_keys.get_secret_value() if settings.api_keys else None
    auth = load_auth(settings.api_keys_file, keys)
    return dev_auth(settings.dev_principals, auth) if settings.dev_principals else auth


def build_app(settings: Settings) -> FastAPI:
    """The HTTP API with its service and in-process read models, closed at shutdown."""
    auth = auth_from(settings)
    service = service_from(settings)
    unrotated = rotation.not_rotated(service.sealer.keys)
    if unrotated is not None:  # loud: a worker that started would serve forged approvals
        service.close()
        raise ConfigurationError(f"refusing to serve: {unrotated}")
    replicas = None  # the queries' hot standbys (docs/ha.md); the views are written here
    if settings.read_replicas:
        try:
            replicas = open_replicas(settings.read_replicas, settings.store,
                                     settings.read_replica_wait)
        except ConfigurationError:
            service.close()
            raise
    views = open_read_models(service)
    if replicas is not None:
        views.replicas = replicas
        replicas.open()
    sweeper = Sweeper(service, views)  # due approvals expire in process, beside the views
    sweeper.start()
    guard = store_guard(service)
    if guard is not None:  # PostgreSQL: probed, so calls fail fast while it is down
        guard.listeners += [views.store_changed, sweeper.store_changed]
        guard.start()

    def close() -> None:
        if guard is not None:
            guard.stop()
        sweeper.stop()
        views.close()
        service.close()

    notifier = notifications(settings, service, auth)
    if notifier is not None:
        notifier.start()

    def closing() -> None:
        if notifier is not None:
            notifier.stop()
        close()

    app = make_app(service, views, auth, on_shutdown=closing,
                   delivery=delivery_policy(settings), signer=checkpoint_signer(settings),
                   cors_origins=settings.cors_origin_list(), guard=guard,
                   sessions=open_sessions(service))
    app.state.callbacks = notifier.callbacks() if notifier is not None else {}
    app.state.review_second_signer = settings.second_signer_tenants()
    if notifier is not None:
        app.state.notifier = notifier
        app.state.metrics.registry.register(NotifyGauges(notifier.store))
    tune_gc(settings.gc_threshold)  # each worker process, once everything is loaded
    return app


def checkpoint_signer(settings: Settings) -> Signer | None:
    """The key evidence packs are signed with (INTERLOCK_CHECKPOINT_KEY), if one is set."""
    if settings.checkpoint_key is None:
        return None
    try:
        return Signer.load(settings.checkpoint_key)
    except InvalidRequestError as exc:
        raise ConfigurationError(f"INTERLOCK_CHECKPOINT_KEY: {exc.message}") from None


def notify_config(settings: Settings) -> NotifyConfig:
    """Each channel's settings, by name (a secret as its value), and the console's URL."""
    named = {f.name: getattr(settings, f.name) for f in fields(NotifyConfig)
             if f.name in Settings.model_fields}
    values: dict[str, Any] = {name: v.get_secret_value() if isinstance(v, SecretStr) else v
              for name, v in named.items()}
    return NotifyConfig(**{**values, "console_url": settings.console_base()})


def notifications(settings: Settings, service: Interlock, auth: AuthConfig) -> Notifier | None:
    """The notifier, when some channel is configured and the store keeps tables."""
    config = notify_config(settings)
    if not any(t.enabled(config) for t in CHANNELS):
        return None
    return Notifier(service, auth, config)


def delivery_policy(settings: Settings) -> DeliveryPolicy:
    """How webhooks are delivered: which private addresses are allowed, how long rows stay."""
    allow = tuple(h.strip() for h in settings.webhook_allow_hosts.split(",") if h.strip())
    return DeliveryPolicy(allow=allow, retention=settings.webhook_retention_days * 86400)


def create_app() -> FastAPI:
    """The API as the INTERLOCK_* settings describe it (`uvicorn --factory` calls this)."""
    settings = load_settings()
    configure_logging(settings.log_format)  # each worker process logs as the settings say
    app = build_app(settings)
    if settings.tracing:
        enable_tracing(app, None)
    return app


def openapi_document() -> str:
    """The committed `openapi.json`: this app's schema, as the drift test renders it."""
    service = build_service("memory://")
    views = open_read_models(service)
    try:
        return json.dumps(make_app(service, views).openapi(), indent=2, ensure_ascii=False) + "\n"
    finally:
        views.close()
        service.close()


def check_serving(settings: Settings) -> None:
    """Refuse, before any process starts, what would make every worker fail or be unsafe."""
    store_env(settings.store)
    if settings.read_replicas:
        open_replicas(settings.read_replicas, settings.store, settings.read_replica_wait)
    resolve = model_resolver()
    for agent in load_agents(settings.agents):
        if isinstance(agent.model, str) and resolve is not None:
            resolve(agent.model)  # builds a client, calls nothing: a missing key shows here
    auth = auth_from(settings)
    check_exposure(settings.host, auth)
    check_secret(settings, auth)
    checkpoint_signer(settings)


def check_secret(settings: Settings, auth: AuthConfig) -> None:
    """API keys mean real users: the public dev secret, or one short enough to guess, would
    make the event chain prove nothing."""
    if auth.dev_mode or settings.allow_dev_secret:
        return
    if settings.store.startswith("memory"):
        return  # nothing outlives the process: there is no chain to forge
    secret = settings.secret_bytes()
    if secret is None:
        raise ConfigurationError(
            "refusing to serve with API keys and the public dev secret: set INTERLOCK_SECRET "
            "(or the file interlock_secret), or pass --allow-dev-secret for development")
    if hmac.compare_digest(secret, DEV_SECRET):
        raise ConfigurationError(
            "refusing to serve with API keys: INTERLOCK_SECRET is the public dev secret; set a "
            "random one (e.g. python -c 'import secrets; print(secrets.token_urlsafe(48))')")
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigurationError(
            f"refusing to serve with API keys: INTERLOCK_SECRET has {len(secret)} bytes, fewer "
            f"than {MIN_SECRET_BYTES}; set a random one (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(48))')")


def check_exposure(host: str, auth: AuthConfig) -> None:
    """Dev mode (no keys) is a single-user mode: refuse to serve it beyond loopback."""
    if auth.dev_mode and not is_loopback(host):
        raise ConfigurationError(
            f"refusing to serve {host} without API keys: pass --keys FILE or set "
            "INTERLOCK_API_KEYS_FILE or INTERLOCK_API_KEYS, or bind 127.0.0.1 for dev mode")


def load_agents(spec: str) -> list[Agent]:
    """`module:attribute` naming an Agent or a sequence of them."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"agents must look like module:attribute, not {spec!r}")
    here = os.getcwd()
    if here not in sys.path:  # as `python -m` and uvicorn do: the current folder's modules
        sys.path.insert(0, here)
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load agents {spec!r}: {exc}") from None
    agents = [found] if isinstance(found, Agent) else list(found) if _many(found) else []
    if not agents or not all(isinstance(a, Agent) for a in agents):
        raise ConfigurationError(f"{spec} is not an Agent or a sequence of Agents")
    return agents


def _many(found: object) -> bool:
    return isinstance(found, list | tuple)


def model_resolver() -> Callable[[str], Model] | None:
    """Provider strings ("openai:gpt-4.1-mini") resolve when the providers package is present.

    Imported here, not at the top: the SDKs take a second and a half to import, which a CLI
    command that builds no service (`--help`, `review`) should not pay."""
    try:
        from interlock.providers import resolve_model
    except ImportError:
        return None
    return resolve_model


if __name__ == "__main__":  # python -m interlock.bootstrap > openapi.json
    sys.stdout.write(openapi_document())
