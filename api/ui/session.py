"""Console sign-in: an API key exchanged for a signed session cookie, and CSRF tokens.

The cookie holds the key's SHA-256 (never the key), an expiry and a MAC. Each request maps
the digest back through the configured keys, so removing a key ends its sessions at once.
The MAC key is derived from every configured key digest: identical in every worker, and
unknown to anyone who does not hold all the keys.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from fastapi import Request, Response

from interlock.api.auth import DEV_PRINCIPAL, AuthConfig, Principal, is_loopback
from interlock.domain.errors import ForbiddenError, UnauthenticatedError

SESSION_COOKIE = "interlock_session"
CSRF_COOKIE = "interlock_csrf"
SESSION_SECONDS = 8 * 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Sessions:
    """Issues and reads session cookies and CSRF tokens for one key set."""

    auth: AuthConfig

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
        digest = self._read(request.cookies.get(SESSION_COOKIE, ""))
        principal = (self.auth.keys or {}).get(digest or "")
        if principal is None:
            raise UnauthenticatedError("sign in with your API key")  # the console redirects
        return principal

    def _read(self, cookie: str) -> str | None:
        body, _, mac = cookie.partition(".")
        if not body or not hmac.compare_digest(mac, self._mac(body)):
            return None
        try:
            data = json.loads(_unb64(body))
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("exp"), int):
            return None
        if data["exp"] < time.time() or not isinstance(data.get("key"), str):
            return None
        return str(data["key"])

    def sign_in(self, api_key: str, request: Request, response: Response) -> Principal:
        """Check the key and set the session cookie; a wrong key is UnauthenticatedError."""
        principal = self.auth.authenticate(f"Bearer {api_key}", None)
        payload = {"key": hashlib.sha256(api_key.strip().encode()).hexdigest(),
                   "exp": int(time.time()) + SESSION_SECONDS}
        body = _b64(json.dumps(payload).encode())
        response.set_cookie(SESSION_COOKIE, f"{body}.{self._mac(body)}", max_age=SESSION_SECONDS,
                            path="/ui", httponly=True, samesite="strict", secure=_https(request))
        return principal

    def csrf(self, request: Request) -> tuple[str, str]:
        """The visitor's CSRF nonce (kept, or new) and the token its forms carry."""
        nonce = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
        return nonce, self._mac("csrf:" + nonce)

    def check_csrf(self, request: Request, token: str | None) -> None:
        """Signed double submit: the form's token must be the MAC of the cookie's nonce."""
        nonce = request.cookies.get(CSRF_COOKIE)
        if not nonce or not token or not hmac.compare_digest(token, self._mac("csrf:" + nonce)):
            raise ForbiddenError("this form has no valid CSRF token; reload the page and try again",
                                 csrf=True)


def keep_csrf(request: Request, response: Response, nonce: str) -> None:
    """Set the CSRF cookie whose nonce the page's forms are signed with."""
    response.set_cookie(CSRF_COOKIE, nonce, path="/ui", httponly=True, samesite="strict",
                        secure=_https(request))


def sign_out(request: Request, response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/ui", httponly=True, samesite="strict",
                           secure=_https(request))


def _https(request: Request) -> bool:
    """Secure cookies behind HTTPS (uvicorn's proxy headers set the scheme behind a proxy)."""
    return request.url.scheme == "https"
