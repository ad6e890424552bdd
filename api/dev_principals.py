"""Dev mode's named principals: `--dev-principals alice,tina:treasury,tom:treasury`.

A newcomer tries a policy (a requester, two treasurers) with the README's first command:
no keys file, no secret. Each name is a principal of tenant `default`; the API takes the
name as its bearer token, the console a picker. Dev mode still serves loopback only, and a
server with API keys refuses the flag.
"""

from __future__ import annotations

from fastapi import Request
from pydantic import ValidationError

from interlock.api.auth import DEV_PRINCIPAL, AuthConfig, Principal
from interlock.domain.errors import ConfigurationError, ForbiddenError, InterlockError

PLAIN_ROLES = frozenset({"requester", "approver", "auditor"})  # a name with no roles given
COOKIE = "interlock_dev_as"
EXAMPLE = "--dev-principals alice,tina:treasury,tom:treasury"
HINT = (f"in dev mode you are 'dev', who asked for this call too: restart the server with "
        f"{EXAMPLE} to act as an approver (docs/console.md)")


def parse_dev_principals(text: str) -> tuple[Principal, ...]:
    """`alice,tina:treasury:approver`: names, each with its roles after colons."""
    found: dict[str, Principal] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, *roles = (part.strip() for part in entry.split(":"))
        principal = _principal(name, roles)
        if name == DEV_PRINCIPAL.id:
            raise ConfigurationError("dev principals: 'dev' is reserved (the default visitor)")
        if found.setdefault(name, principal) is not principal:
            raise ConfigurationError(f"dev principals: {name!r} is named twice")
    if not found:
        raise ConfigurationError("dev principals: no names given (e.g. alice,tina:treasury)")
    return tuple(found.values())


def _principal(name: str, roles: list[str]) -> Principal:
    try:
        return Principal(id=name, roles=frozenset(roles) if roles else PLAIN_ROLES)
    except ValidationError as exc:
        problem = exc.errors()[0]
        what = "role" if problem["loc"][0] == "roles" else "principal id"
        raise ConfigurationError(
            f"dev principals: bad {what} in {name!r}: {problem['msg']}") from None


def dev_auth(text: str, base: AuthConfig | None = None) -> AuthConfig:
    """Dev mode with these principals; refused when `base` has API keys (not dev mode)."""
    if base is not None and not base.dev_mode:
        raise ConfigurationError("--dev-principals is for dev mode: this server has API keys")
    return AuthConfig(keys=None, dev={p.id: p for p in parse_dev_principals(text)})


def console_visitor(auth: AuthConfig, request: Request, who: Principal) -> Principal:
    """The console's visitor: in dev mode, the principal the picker chose (a cookie)."""
    if not auth.dev_mode or who is not DEV_PRINCIPAL:
        return who
    return auth.dev.get(request.cookies.get(COOKIE, ""), who)


def dev_hint(exc: InterlockError) -> str | None:
    """How to go on when dev mode's one principal is refused as a requester of the call it
    decides (four-eyes): the flag that gives it others to act as; None for anything else."""
    if not isinstance(exc, ForbiddenError) or exc.details.get("reason") != "requester":
        return None
    return HINT if exc.details.get("actor") == DEV_PRINCIPAL.id else None
