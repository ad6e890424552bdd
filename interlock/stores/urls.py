"""Store URLs (memory://, sqlite:///file.db, postgresql://...) to eventsourcing settings.

A PostgreSQL URL is read by libpq itself (psycopg's `conninfo_to_dict`), once Interlock's
own query parameters (`schema`, `pool_size`, `max_overflow`) are taken out: every form libpq
accepts (several hosts, `?host=a,b&port=1,2`, a socket folder, `target_session_attrs`,
`sslmode`, ...) means what it means to psql, and what libpq would refuse is refused at start
with libpq's words. What the URL leaves out (host, user, database) libpq takes from its
environment (PGHOST, PGUSER, ...) and its defaults, as psql does.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from interlock.domain.errors import ConfigurationError

SCHEMES = "memory://, sqlite:///path.db or postgresql://..."
STORE_CONNINFO = "STORE_CONNINFO"  # the setting: libpq's connection string for the store
OWN = {"schema": "public", "pool_size": "5", "max_overflow": "10"}  # Interlock's, defaults
# A store is written to: sessions libpq would open on a standby could never commit.
WRITABLE_SESSIONS = ("any", "read-write", "primary")
LIBRARY_NAMES = {"dbname": "POSTGRES_DBNAME", "host": "POSTGRES_HOST", "port": "POSTGRES_PORT",
                 "user": "POSTGRES_USER", "password": "POSTGRES_PASSWORD"}


def store_env(url: str, deadline: float | None = None) -> dict[str, str]:
    """The eventsourcing environment for a store URL; ConfigurationError if it names none.

    `deadline`: the seconds a PostgreSQL store call may wait for the store (then 503).
    """
    scheme = url.partition("://")[0] if "://" in url else ""
    if scheme == "memory":
        return {"PERSISTENCE_MODULE": "eventsourcing.popo"}
    if scheme == "sqlite":
        parts = urlsplit(url)
        return _sqlite(url, parts.netloc, parts.path)
    if scheme in ("postgresql", "postgres"):
        return {**postgres_env(url),
                **({"STORE_DEADLINE": str(deadline)} if deadline is not None else {})}
    raise ConfigurationError(f"unknown store {redacted(url)!r}: use {SCHEMES}")


def postgres_env(url: str) -> dict[str, str]:
    """The settings of a PostgreSQL store: libpq's reading of the URL (STORE_CONNINFO, and
    the library's five names, empty where the URL is silent) and Interlock's own."""
    conninfo, own = split_own(url)
    params = libpq_params(conninfo, url)
    for name in ("pool_size", "max_overflow"):
        if not own[name].isdigit():
            raise ConfigurationError(f"store URL {redacted(url)!r}: {name}={own[name]!r} is not"
                                     " a whole number")
    if not own["schema"]:
        raise ConfigurationError(f"store URL {redacted(url)!r}: schema= names no schema")
    return {
        "PERSISTENCE_MODULE": "interlock.stores.postgres:InterlockPostgresFactory",
        **{library: params.get(name, "") for name, library in LIBRARY_NAMES.items()},
        STORE_CONNINFO: make_conninfo(**params),
        "POSTGRES_SCHEMA": own["schema"],
        "POSTGRES_POOL_SIZE": own["pool_size"],
        "POSTGRES_MAX_OVERFLOW": own["max_overflow"],
    }


def split_own(url: str) -> tuple[str, dict[str, str]]:
    """The URL without Interlock's query parameters (left verbatim for libpq), and theirs."""
    base, mark, query = url.partition("?")
    own, kept = dict(OWN), []
    for item in query.split("&") if mark else []:
        key, _, value = item.partition("=")
        if unquote(key) in OWN:
            own[unquote(key)] = unquote(value)
        else:
            kept.append(item)
    return base + ("?" + "&".join(kept) if kept else ""), own


def libpq_params(conninfo: str, url: str) -> dict[str, str]:
    """What libpq reads in `conninfo`; ConfigurationError naming the part it cannot take."""
    try:
        params = {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            f"store URL {redacted(url)!r} is not one libpq reads: {_said(exc)}") from None
    where = f"store URL {redacted(url)!r}"
    sessions = params.get("target_session_attrs", "any")
    if sessions not in WRITABLE_SESSIONS:
        raise ConfigurationError(
            f"{where}: target_session_attrs={sessions} would connect to a standby, where "
            f"nothing can be written; use one of {', '.join(WRITABLE_SESSIONS)}")
    if params.get("replication", "").lower() not in ("", "0", "false", "off", "no"):
        raise ConfigurationError(f"{where}: replication={params['replication']} opens a "
                                 "replication session, which cannot store events")
    _check_ports(where, params)
    return params


def _check_ports(where: str, params: dict[str, str]) -> None:
    """libpq checks ports only when it connects: named here, at start, rather than later."""
    ports = params.get("port", "").split(",")
    for port in ports:
        if port.strip() and not (port.strip().isdigit() and 0 < int(port) < 65536):
            raise ConfigurationError(f"{where}: port {port!r} is not a port number")
    hosts = max(len(params.get(n, "").split(",")) for n in ("host", "hostaddr"))
    if len(ports) > 1 and len(ports) != hosts:
        raise ConfigurationError(f"{where}: {len(ports)} ports for {hosts} hosts (libpq needs"
                                 " one port for all, or one per host)")


def redacted(url: str) -> str:
    """`url` with its password (after user: in the authority, or ?password=) hidden."""
    scheme, sep, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        who, _, hosts = authority.rpartition("@")
        if ":" in who:
            authority = f"{who.partition(':')[0]}:***@{hosts}"
    base, mark, query = tail.partition("?")
    items = ["password=***" if i.partition("=")[0] == "password" else i
             for i in query.split("&")] if mark else []
    return scheme + sep + authority + slash + base + (mark + "&".join(items) if mark else "")


def _said(exc: psycopg.Error) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


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
