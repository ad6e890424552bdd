"""API keys → principals (domain/principals.py); dev mode when no key is configured."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import stat
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from interlock.domain.chat.policies import normalise_id
from interlock.domain.errors import ConfigurationError, ForbiddenError, UnauthenticatedError
from interlock.domain.principals import DEV_PRINCIPAL as DEV_PRINCIPAL
from interlock.domain.principals import Principal as Principal
from interlock.domain.principals import Role as Role

log = logging.getLogger("interlock.auth")
HASHED = "sha256:"
_HEX = re.compile(r"[0-9a-f]{64}")


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def hash_key(key: str) -> str:
    """How a keys file may hold a key: `sha256:<hex digest>`, never the key itself."""
    return HASHED + _digest(key)


def _stored(entry: str) -> str:
    """The digest an entry of the keys file stands for: given (`sha256:...`) or computed."""
    if entry.startswith(HASHED):
        digest = entry.removeprefix(HASHED).lower()
        if not _HEX.fullmatch(digest):
            raise ConfigurationError("a hashed API key must be sha256: and 64 hex digits")
        return digest
    return _digest(entry)


@dataclass(frozen=True)
class AuthConfig:
    """Keys by their SHA-256; `None` keys means dev mode (one all-powerful local principal)."""

    keys: dict[str, Principal] | None = None
    dev: dict[str, Principal] = field(default_factory=dict)  # dev mode's named principals

    @property
    def dev_mode(self) -> bool:
        return self.keys is None

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> AuthConfig:
        """Each entry maps a key, or its `sha256:` hash, to a principal; a principal may
        hold several keys (rotation), given the same tenant and roles under each."""
        try:
            keys = {_stored(k): Principal.model_validate(v) for k, v in raw.items()}
        except ValidationError as exc:
            raise ConfigurationError(f"bad API key entry: {_first(exc)}") from None
        if not keys:
            raise ConfigurationError("the API key set is empty")
        if len(keys) < len(raw):
            raise ConfigurationError("one API key is listed twice (as itself and its hash)")
        seen: dict[str, Principal] = {}
        for principal in keys.values():
            if seen.setdefault(principal.id, principal) != principal:
                raise ConfigurationError(f"principal {principal.id!r} has keys with different "
                                         "tenants or roles")
        _check_distinct_ids(keys.values())
        return cls(keys)

    def authenticate(self, authorization: str | None, client_host: str | None) -> Principal:
        if self.keys is None:
            if not is_loopback(client_host):
                raise ForbiddenError("dev mode serves loopback clients only")
            return self.dev_as(authorization)
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthenticatedError("send Authorization: Bearer <api key>")
        principal = self.keys.get(_digest(token.strip()))
        if principal is None:
            raise UnauthenticatedError("unknown API key")
        return principal


    def dev_as(self, authorization: str | None) -> Principal:
        """Dev mode: the named principal a bearer token names (api/dev_principals.py), else
        `dev`."""
        return self.dev.get((authorization or "").partition(" ")[2].strip(), DEV_PRINCIPAL)


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"


def _check_distinct_ids(principals: Iterable[Principal]) -> None:
    """Four eyes compares normalised ids: two spellings of one id would be one person twice."""
    seen: dict[tuple[str, str], str] = {}
    for p in principals:
        key = (p.tenant, normalise_id(p.id))
        if seen.setdefault(key, p.id) != p.id:
            raise ConfigurationError(
                f"API keys name {seen[key]!r} and {p.id!r} in tenant {p.tenant!r}: ids that"
                " differ only in case or spacing are one person; use one spelling")


@functools.lru_cache(maxsize=256)  # per request; parsing an address runs ipaddress' Python
def is_loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return host is not None and ip_address(host).is_loopback
    except ValueError:
        return False


def _parse(text: str, toml: bool) -> dict[str, Any]:
    try:
        data = tomllib.loads(text) if toml else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot parse API keys: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError("API keys must map each key to {id, tenant, roles}")
    return data


def load_auth(keys_file: Path | None = None, keys_json: str | None = None) -> AuthConfig:
    """Keys from a JSON or TOML file (only its owner may read it), else from JSON text,
    else dev mode (no keys)."""
    if keys_file is not None:
        try:
            mode = keys_file.stat().st_mode
            text = keys_file.read_text()
        except OSError as exc:
            raise ConfigurationError(f"cannot read API keys file {keys_file}: {exc}") from None
        if mode & 0o077:
            raise ConfigurationError(
                f"API keys file {keys_file} is readable by others (mode {stat.S_IMODE(mode):o});"
                f" run: chmod 600 {keys_file}")
        return AuthConfig.from_mapping(_parse(text, keys_file.suffix == ".toml"))
    if keys_json:
        return AuthConfig.from_mapping(_parse(keys_json, toml=False))
    return AuthConfig(None)
