"""What is known about the request being served, for log lines, metrics and webhooks."""

from __future__ import annotations

import os
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Scope

# A client's id is kept when it is a sane token: no spaces, no control characters, short.
_SANE_ID = re.compile(r"[A-Za-z0-9._:@+=/-]{1,128}")


@dataclass
class RequestInfo:
    """Mutable on purpose: the auth dependency fills in the caller after the middleware
    made it, and tasks the request starts (a streamed turn) see the same object."""

    request_id: str
    scope: Scope = field(default_factory=dict, repr=False)
    principal: str | None = None
    tenant: str | None = None

    @property
    def chat_id(self) -> str | None:
        """The chat the route names, once routing has resolved it."""
        value = self.scope.get("path_params", {}).get("chat_id")
        return None if value is None else str(value)

    @property
    def route(self) -> str | None:
        """The route's template (`/v1/chats/{chat_id}`), once routing has resolved it."""
        route = self.scope.get("route")
        path = getattr(route, "path", None)
        return path if isinstance(path, str) else None

    def fields(self) -> dict[str, Any]:
        """What log lines carry: only what is known (every log line asks: no dict built
        to be filtered, no property call for the chat id)."""
        known: dict[str, Any] = {"request_id": self.request_id}
        if self.principal is not None:
            known["principal"] = self.principal
        if self.tenant is not None:
            known["tenant"] = self.tenant
        params = self.scope.get("path_params")
        chat_id = params.get("chat_id") if params else None
        if chat_id is not None:
            known["chat_id"] = str(chat_id)
        return known


_current: ContextVar[RequestInfo | None] = ContextVar("interlock_request", default=None)


def request_id_from(header: str | None) -> str:
    """The client's `X-Request-ID` when it is sane, else a fresh one."""
    if header is not None and _SANE_ID.fullmatch(header):
        return header
    return _uuid4_hex()


def _uuid4_hex() -> str:
    """`uuid.uuid4().hex` without building a UUID (its constructor runs Python)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return raw.hex()


def begin(request_id: str, scope: Scope) -> RequestInfo:
    """Start a request's context (the middleware calls this)."""
    info = RequestInfo(request_id, scope)
    _current.set(info)
    return info


def current() -> RequestInfo | None:
    """The request being served in this context, if any."""
    return _current.get()


def note_principal(principal_id: str, tenant: str) -> None:
    """Record who is calling (the auth dependency calls this)."""
    info = _current.get()
    if info is not None:
        info.principal, info.tenant = principal_id, tenant
