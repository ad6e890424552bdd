"""Console sign-in: an API key exchanged for a server-side session, and CSRF tokens.

The cookie holds only a random session id; the session (the digest of the key it signed in
with, its expiry) lives in the store's session table, so every worker sees a sign-out at
once, a copied cookie dies with it, and removing a key ends its sessions. A form's CSRF
token is the MAC of the session id: a token made for another session, or for none, is
refused. Before sign-in (the sign-in form, dev mode) it is the MAC of a nonce cookie.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from fastapi import Request, Response

from interlock.api.auth import DEV_PRINCIPAL, AuthConfig, Principal, is_loopback
from interlock.domain.errors import ForbiddenError, UnauthenticatedError

SESSION_COOKIE = "interlock_session"
CSRF_COOKIE = "interlock_csrf"
SESSION_SECONDS = 8 * 3600
_ID_LENGTH = 43  # secrets.token_urlsafe(32)


class SessionStore(Protocol):
    """Where sessions live: `add` one, `key_of` a live one, `remove` one (the wiring hands
    the store's table over; interlock/stores/console_sessions.py)."""

    def add(self, session: str, key: str, expires: int, now: int) -> None: ...

    def key_of(self, session: str, now: int) -> str | None: ...

    def remove(self, session: str) -> None: ...


class MemorySessions:
    """Sessions of one process (a memory store: nothing else can share them)."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def add(self, session: str, key: str, expires: int, now: int) -> None:
        with self._lock:
            self._rows = {s: r for s, r in self._rows.items() if r[1] > now}
            self._rows[session] = (key, expires)

    def key_of(self, session: str, now: int) -> str | None:
        row = self._rows.get(session)
        return row[0] if row is not None and row[1] > now else None

    def remove(self, session: str) -> None:
        with self._lock:
            self._rows.pop(session, None)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _stored_id(session: str) -> str:
    """What the table keeps of a session id: its hash (a database read yields no cookie)."""
    return hashlib.sha256(b"interlock-console-session\n" + session.encode()).hexdigest()


@dataclass(frozen=True)
class Sessions:
    """Issues, reads and revokes console sessions and their CSRF tokens for one key set."""

    auth: AuthConfig
    store: SessionStore = field(default_factory=MemorySessions)

    @property
    def _mac_key(self) -> bytes:
        digests = sorted(self.auth.keys or {})
        return hashlib.sha256(("interlock-console\n" + "\n".join(digests)).encode()).digest()

    def _mac(self, text: str) -> str:
        return _b64(hmac.new(self._mac_key, text.encode(), hashlib.sha256).digest())

    def principal(self, request: Request) -> Principal:
        """The signed-in visitor; in dev mode every loopback visitor is `dev`."""
        if self.auth.dev_mode:
            if not is_loopback(request.client.host if request.client else None):
                raise ForbiddenError("dev mode serves loopback clients only")
            return DEV_PRINCIPAL
        found = self._session(request)
        principal = (self.auth.keys or {}).get(found[1]) if found else None
        if principal is None:
            raise UnauthenticatedError("sign in with your API key")  # the console redirects
        return principal

    def _session(self, request: Request) -> tuple[str, str] | None:
        """The visitor's session id and the digest of its key, if the session has not
        ended (looked up once per request)."""
        if "console_session" in request.scope:
            found: tuple[str, str] | None = request.scope["console_session"]
            return found
        session = request.cookies.get(SESSION_COOKIE, "")
        key = None
        if not self.auth.dev_mode and len(session) == _ID_LENGTH:
            key = self.store.key_of(_stored_id(session), int(time.time()))
        found = request.scope["console_session"] = (session, key) if key else None
        return found

    def opening(self, request: Request, who: Principal) -> str:
        """What names the visitor's console session in a view receipt: a hash of the
        session's stored id (never its cookie); in dev mode, with no sign-in to tell
        sessions apart, one per principal."""
        found = self._session(request)
        if found is None:
            return hashlib.sha256(f"interlock-dev-opening\n{who.id}".encode()).hexdigest()
        return hashlib.sha256(
            ("interlock-view-receipt\n" + _stored_id(found[0])).encode()).hexdigest()

    def sign_in(self, api_key: str, request: Request, response: Response) -> Principal:
        """Check the key, open a session and set its cookie; a wrong key is
        UnauthenticatedError."""
        principal = self.auth.authenticate(f"Bearer {api_key}", None)
        earlier = request.cookies.get(SESSION_COOKIE, "")
        if len(earlier) == _ID_LENGTH:  # this browser's previous session ends here
            self.store.remove(_stored_id(earlier))
        session, now = secrets.token_urlsafe(32), int(time.time())
        self.store.add(_stored_id(session), hashlib.sha256(api_key.strip().encode()).hexdigest(),
                       now + SESSION_SECONDS, now)
        response.set_cookie(SESSION_COOKIE, session, max_age=SESSION_SECONDS, path="/ui",
                            httponly=True, samesite="strict", secure=_https(request))
        return principal

    def sign_out(self, request: Request, response: Response) -> None:
        """End the session on the server (its cookie, copied or not, is dead) and drop it."""
        session = request.cookies.get(SESSION_COOKIE, "")
        if len(session) == _ID_LENGTH:
            self.store.remove(_stored_id(session))
        request.scope.pop("console_session", None)
        response.delete_cookie(SESSION_COOKIE, path="/ui", httponly=True, samesite="strict",
                               secure=_https(request))

    def csrf(self, request: Request) -> tuple[str, str]:
        """The visitor's CSRF nonce (kept, or new) and the token its forms carry: bound to
        the session when there is one, else to the nonce."""
        nonce = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
        return nonce, self._expected(request, nonce)

    def check_csrf(self, request: Request, token: str | None) -> None:
        """The form's token must be the one this visitor's session (or, with none, the
        nonce cookie) gives: a token of another session or of none is refused."""
        expected = self._expected(request, request.cookies.get(CSRF_COOKIE))
        if not expected or not token or not hmac.compare_digest(token, expected):
            raise ForbiddenError("this form has no valid CSRF token; reload the page and try again",
                                 csrf=True)

    def _expected(self, request: Request, nonce: str | None) -> str:
        found = self._session(request)
        if found is not None:
            return self._mac("csrf-session:" + found[0])
        return self._mac("csrf:" + nonce) if nonce else ""


def keep_csrf(request: Request, response: Response, nonce: str) -> None:
    """Set the CSRF cookie whose nonce the page's forms are signed with (before sign-in)."""
    response.set_cookie(CSRF_COOKIE, nonce, path="/ui", httponly=True, samesite="strict",
                        secure=_https(request))


def _https(request: Request) -> bool:
    """Secure cookies behind HTTPS (uvicorn's proxy headers set the scheme behind a proxy)."""
    return request.url.scheme == "https"
