"""Store URLs (memory://, sqlite:///file.db, postgresql://...) to eventsourcing settings."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, unquote, urlsplit

from interlock.domain.errors import ConfigurationError

SCHEMES = "memory://, sqlite:///path.db or postgresql://..."


def store_env(url: str, deadline: float | None = None) -> dict[str, str]:
    """The eventsourcing environment for a store URL; ConfigurationError if it names none.

    `deadline`: the seconds a PostgreSQL store call may wait for the store (then 503).
    """
    parts = urlsplit(url)
    if parts.scheme == "memory":
        return {"PERSISTENCE_MODULE": "eventsourcing.popo"}
    if parts.scheme == "sqlite":
        return _sqlite(url, parts.netloc, parts.path)
    if parts.scheme in ("postgresql", "postgres"):
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        return {
            "PERSISTENCE_MODULE": "interlock.stores.postgres:InterlockPostgresFactory",
            "POSTGRES_DBNAME": parts.path.removeprefix("/") or "postgres",
            "POSTGRES_HOST": parts.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(parts.port or 5432),
            "POSTGRES_USER": unquote(parts.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(parts.password or ""),
            "POSTGRES_SCHEMA": query.get("schema", "public"),
            "POSTGRES_POOL_SIZE": query.get("pool_size", "5"),
            "POSTGRES_MAX_OVERFLOW": query.get("max_overflow", "10"),
            **({"STORE_DEADLINE": str(deadline)} if deadline is not None else {}),
        }
    raise ConfigurationError(f"unknown store {url!r}: use {SCHEMES}")


def check_exists(url: str) -> None:
    """ConfigurationError unless `url` names a store that already holds something to read:
    a tool that audits a store must never create an empty one and pass on it."""
    parts = urlsplit(url)
    if parts.scheme == "memory":
        raise ConfigurationError("memory:// holds nothing to audit: name the server's store")
    if parts.scheme == "sqlite":
        name = store_env(url)["SQLITE_DBNAME"]
        if name != ":memory:" and not os.path.exists(name):
            raise ConfigurationError(f"no store at {name!r}: {url!r} names no file (an audit "
                                     "tool never creates one); check the path")


def _sqlite(url: str, netloc: str, path: str) -> dict[str, str]:
    name = unquote(path.removeprefix("/")) if netloc == "" else ""
    if not name:
        raise ConfigurationError(f"sqlite store needs a file: sqlite:///path.db, not {url!r}")
    return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": name,
            "SQLITE_LOCK_TIMEOUT": "10"}
