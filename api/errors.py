"""Errors to HTTP in one place: each error class carries its status; the body is
`{"error": {"code", "message", "details"}}`."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from interlock.api.dev_principals import dev_hint
from interlock.domain.errors import (
    ConflictError,
    InterlockError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    StoreUnavailableError,
    UnauthenticatedError,
    UnavailableError,
)
from interlock.domain.storage.outages import cause

log = logging.getLogger("interlock.api")


class PayloadTooLargeError(InvalidRequestError):
    code = "payload_too_large"
    status = 413

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body exceeds {limit} bytes", limit=limit)


class ViewsBehindError(UnavailableError):
    """The read models did not catch up in time: retry shortly."""

    code = "views_behind"

    def __init__(self) -> None:
        super().__init__("the read models are behind the event log; retry shortly")


class NoSigningKeyError(ConflictError):
    """An evidence pack was asked of a server that holds no checkpoint key to sign it."""

    code = "no_signing_key"

    def __init__(self) -> None:
        super().__init__("this server has no checkpoint signing key, so it cannot sign an "
                         "evidence pack: set INTERLOCK_CHECKPOINT_KEY to the private key file "
                         "(made by `interlock audit keygen`), or write the pack with "
                         "`interlock audit evidence --review ID --key FILE`")


class RouteNotFoundError(NotFoundError):
    code = "not_found"


class MethodNotAllowedError(InterlockError):
    code = "method_not_allowed"
    status = 405


def error_body(code: str, message: str, details: dict[str, Any]) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


class ErrorJSON(JSONResponse):
    """An error body as ASCII JSON: whatever a client sent and an error repeats back (a lone
    surrogate, say) still encodes, so the answer stays the 4xx it is."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


def error_response(exc: InterlockError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The HTTP answer for a typed error: the status its class carries."""
    if isinstance(exc, UnauthenticatedError):
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    retry_after = getattr(exc, "retry_after", None)  # a 503 or a 429 says when to come back
    if isinstance(retry_after, int):
        headers = {**(headers or {}), "Retry-After": str(retry_after)}
    return ErrorJSON(error_body(exc.code, exc.message, exc.details), exc.status, headers=headers)


def _validation_details(exc: RequestValidationError) -> dict[str, Any]:
    errors = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg")), "type": str(e.get("type"))}
        for e in exc.errors()
    ]
    return {"errors": errors}


async def _on_interlock_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InterlockError)
    auth = getattr(request.app.state, "auth", None)
    hint = dev_hint(exc) if auth is not None and auth.dev_mode else None
    if hint is not None:  # dev mode's one user asked for the call: say how to decide it
        return ErrorJSON(error_body(exc.code, f"{exc.message}; {hint}",
                                    {**exc.details, "hint": hint}), exc.status)
    return error_response(exc)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    message = "the request is invalid"
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body_failed = any(tuple(e.get("loc", ()))[:1] == ("body",) for e in exc.errors())
    if body_failed and kind != "application/json":
        message = (f"the request body must be JSON sent as Content-Type: application/json,"
                   f" not {kind or 'no content type'}")
    return error_response(InvalidRequestError(message, **_validation_details(exc)))


async def _on_http_error(_: Request, exc: Exception) -> JSONResponse:
    """Starlette's own refusals (no such route, wrong method) in our error shape."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        return error_response(MethodNotAllowedError("method not allowed"), exc.headers)
    if exc.status_code == 404:
        return error_response(RouteNotFoundError("no such route"), exc.headers)
    # Anything else Starlette refuses (a body it cannot parse, say) is a malformed request.
    status = 422 if exc.status_code == 400 else exc.status_code
    body = error_body("invalid_request", str(exc.detail), {})
    return JSONResponse(body, status, headers=exc.headers)


def store_failure(exc: Exception) -> StoreUnavailableError:
    """The store failed a call past the library's retries: unavailable, not a bug (503)."""
    return StoreUnavailableError(f"{cause(exc)}, past its retries")


async def _on_store_failure(_: Request, exc: Exception) -> JSONResponse:
    return error_response(store_failure(exc))


async def _on_unexpected(_: Request, exc: Exception) -> JSONResponse:
    """A bug, not a client error: logged with its traceback, answered in the same shape."""
    log.error("unhandled error", exc_info=exc)
    return error_response(InternalError("internal error"))


def install(app: FastAPI) -> None:
    app.add_exception_handler(InterlockError, _on_interlock_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(OperationalError, _on_store_failure)
    app.add_exception_handler(InterfaceError, _on_store_failure)
    app.add_exception_handler(Exception, _on_unexpected)


def describe(exc: BaseException) -> dict[str, Any]:
    """The error body for an exception raised after a stream began (its `error` event)."""
    if isinstance(exc, OperationalError | InterfaceError):
        exc = store_failure(exc)
    if isinstance(exc, InterlockError):
        return error_body(exc.code, exc.message, exc.details)
    log.error("unhandled error in a streamed turn", exc_info=exc)
    return error_body("internal_error", "internal error", {})
