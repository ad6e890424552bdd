"""Rendering for the console: templates, CSRF on every page, security headers, errors."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from interlock.api.ui.forms_parse import RawText, refill
from interlock.api.ui.outcome import answer_words
from interlock.api.ui.policy import held_summary
from interlock.api.ui.session import Sessions, keep_csrf
from interlock.api.ui.views import pretty
from interlock.api.ui.words import event_words, fields, label, short_sha, summary
from interlock.domain.chat.rules import MAX_REASON
from interlock.domain.errors import InterlockError, InvalidRequestError, UnauthenticatedError

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["pretty"] = pretty
templates.env.globals["max_reason"] = MAX_REASON
templates.env.globals["held"] = held_summary
templates.env.filters["refill"] = refill
templates.env.filters["answer_words"] = answer_words
templates.env.filters["by_path"] = lambda errors: by_path(errors)
templates.env.filters["json_text"] = lambda value: json_text(value)
templates.env.filters["fields"] = fields
templates.env.filters["field_label"] = label
templates.env.filters["summary"] = summary
templates.env.filters["short_sha"] = short_sha
templates.env.filters["event_words"] = event_words
templates.env.filters["when"] = lambda t: t.strftime("%Y-%m-%d %H:%M:%S UTC") if t else ""
# No inline script or style anywhere: the policy forbids both, so injected markup cannot run.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
FORM_TYPE = "application/x-www-form-urlencoded"


def by_path(errors: list[dict[str, Any]]) -> dict[str, list[str]]:
    """A refusal's messages by the input they belong to (`lines.0.qty`)."""
    found: dict[str, list[str]] = {}
    for e in errors:
        found.setdefault(".".join(str(part) for part in e.get("loc", ())), []).append(e["msg"])
    return found


def json_text(value: Any) -> str:
    """A free-form value in its text area: as typed when it was not JSON, else indented."""
    if isinstance(value, RawText):
        return value.text
    return "" if value is None else pretty(value)


def sessions(request: Request) -> Sessions:
    found: Sessions = request.app.state.sessions
    return found


def base(request: Request) -> str:
    """Where the console is mounted ("/ui")."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page; every page carries the CSRF token its forms post back."""
    nonce, token = sessions(request).csrf(request)
    auth = sessions(request).auth
    dev_names = sorted(auth.dev) if auth.dev_mode else []  # the picker's names
    response = templates.TemplateResponse(
        request, name, {"csrf": token, "base": base(request), "dev_names": dev_names, **context},
        status_code=status)
    keep_csrf(request, response, nonce)
    response.headers.update(HEADERS)
    return response


def redirect(request: Request, path: str) -> RedirectResponse:
    """303 See Other to a console path (after a POST, the browser GETs it)."""
    return RedirectResponse(base(request) + path, status_code=303)


async def form_data(request: Request) -> dict[str, str]:
    """A url-encoded form body; anything else is refused with a clear message."""
    if request.headers.get("content-type", "").split(";")[0].strip() != FORM_TYPE:
        raise InvalidRequestError(f"the console accepts {FORM_TYPE} forms only")
    try:
        text = (await request.body()).decode()
    except UnicodeDecodeError:
        raise InvalidRequestError("the form is not UTF-8") from None
    return dict(parse_qsl(text, keep_blank_values=True))


async def checked_form(request: Request) -> dict[str, str]:
    """The form, once its CSRF token matches the visitor's cookie."""
    data = await form_data(request)
    sessions(request).check_csrf(request, data.get("csrf"))
    return data


def zone(raw: str | None) -> tzinfo:
    """The viewer's time zone as the browser names it (`Asia/Tokyo`); blank is UTC."""
    if not raw:
        return UTC
    try:
        return ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidRequestError(f"tz is not a time zone: {raw!r}", field="tz") from None


def instant(name: str, raw: str | None, where: tzinfo = UTC) -> datetime | None:
    """A filter's date or date-time (in `where` unless it says otherwise); blank is none."""
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw)
        return (value if value.tzinfo else value.replace(tzinfo=where)).astimezone(UTC)
    except ValueError:
        raise InvalidRequestError(f"{name} is not a date or date-time: {raw!r}",
                                  field=name) from None
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the first UTC instant
        raise InvalidRequestError(f"{name} is out of range once in UTC: {raw!r}",
                                  field=name) from None


async def on_error(request: Request, exc: Exception) -> Response:
    """Typed errors as pages (sign-in as a redirect); polled fragments get a short answer."""
    assert isinstance(exc, InterlockError)
    fragment = request.headers.get("x-console-fetch") == "1"
    if isinstance(exc, UnauthenticatedError) and not fragment:
        target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        return RedirectResponse(f"{base(request)}/sign-in?next={target}", status_code=303)
    if fragment:
        return JSONResponse({"error": {"code": exc.code, "message": exc.message}}, exc.status)
    title = "Form expired" if exc.details.get("csrf") else "Cannot show this"
    return render(request, "error.html", exc.status, title=title, message=exc.message,
                  code=exc.code)


async def on_http_error(request: Request, exc: Exception) -> Response:
    """No such page, wrong method: an HTML page, not a JSON body."""
    assert isinstance(exc, StarletteHTTPException)
    title = "Not found" if exc.status_code == 404 else "Cannot do that"
    return render(request, "error.html", exc.status_code, title=title,
                  message=str(exc.detail), code=str(exc.status_code))


async def on_bad_query(request: Request, exc: Exception) -> Response:
    """A query or path the page cannot take (an unknown filter value, say): a 422 page."""
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}"
                         for e in exc.errors())
    return await on_error(request, InvalidRequestError(f"the request is invalid ({problems})"))
