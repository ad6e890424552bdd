"""OpenAPI a generator can use: operation ids, tags, error codes and statuses, set centrally.

Routers stay as they are; `finish_routes` walks them once at app creation and
`install_openapi` patches the generated document, so a route added later is covered too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from interlock.api.deps import current_views
from interlock.domain.errors import InterlockError

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_WHY = {
    413: "The request body exceeds the limit (`payload_too_large`).",
    500: "A bug (`internal_error`); logged with its traceback.",
    503: "The read models did not catch up in time (`views_behind`); retry shortly.",
}


def package_version() -> str:
    """The installed package's version: the API document's version."""
    try:
        return version("interlock")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0"


def operation_id(route: APIRoute) -> str:  # the app's generate_unique_id_function
    """`create_chat` → `createChat`: the endpoint's name, as generators name methods."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), route.name)


def error_codes() -> list[str]:
    """Every code an error of the package answers with, sorted."""
    seen: set[str] = set()
    pending: list[type[InterlockError]] = [InterlockError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        code = getattr(cls, "code", None)
        if isinstance(code, str) and cls.__module__.startswith("interlock."):
            seen.add(code)
    return sorted(seen)


def views_dependent(routers: Iterable[APIRouter]) -> set[str]:
    """Operation ids of the routes that wait for the read models (and so may answer 503)."""
    return {operation_id(r) for router in routers for r in router.routes
            if isinstance(r, APIRoute) and _depends_on(r.dependant, current_views)}


def _depends_on(dependant: Dependant, call: object) -> bool:
    return any(d.call is call or _depends_on(d, call) for d in dependant.dependencies)


def install_openapi(app: FastAPI, routers: Iterable[APIRouter]) -> None:
    """Build the document once: error `code` as an enum, every error status documented."""
    waits = views_dependent(routers)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version,
                                 description=app.description, routes=app.routes,
                                 tags=app.openapi_tags)
            _enum_codes(schema)
            for path, operation in _operations(schema):
                operation.setdefault("tags", [_tag(path)])
                _document_errors(operation, waits)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _operations(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, methods in schema.get("paths", {}).items():
        for operation in methods.values():
            yield path, operation


def _tag(path: str) -> str:
    """A route whose router gave no tag is grouped under its first segment after `/v1`."""
    segments = [s for s in path.split("/") if s and s != "v1"]
    return segments[0] if segments else "root"


def _document_errors(operation: dict[str, Any], waits: set[str]) -> None:
    statuses = [500]
    if "requestBody" in operation:
        statuses.append(413)
    if operation["operationId"] in waits:
        statuses.append(503)
    for status in statuses:
        operation["responses"].setdefault(str(status), {
            "description": _WHY[status],
            "content": {"application/json": {"schema": ERROR_REF}},
        })
    operation["responses"] = dict(sorted(operation["responses"].items()))


def _enum_codes(schema: dict[str, Any]) -> None:
    detail = schema.get("components", {}).get("schemas", {}).get("ErrorDetail")
    if detail is not None:
        detail["properties"]["code"]["enum"] = error_codes()
