"""Every JSON request body is parsed here: the hot routes call `parse_json`, FastAPI's
routes through `JsonRoute`, so a hostile body gets the same 422 on every route.

`json.loads` raises RecursionError, not ValueError, on a body nested deeper than the
interpreter's stack (100,000 `[`): that escaped the hot routes as a 500. Here every
refusal is a `json.JSONDecodeError`, which FastAPI answers as an invalid request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response


def parse_json(raw: bytes) -> Any:
    """The body's JSON; any refusal (bad JSON, bad UTF-8, nesting too deep) a JSONDecodeError."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("JSON nested too deep", "", 0) from None
    except ValueError as exc:  # UnicodeDecodeError and the like
        raise json.JSONDecodeError(f"not JSON: {exc}", "", 0) from None


class _JsonRequest(Request):
    """A request whose `json()` is `parse_json` (FastAPI reads a JSON body through it)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body())
        return self._json


class JsonRoute(APIRoute):
    """FastAPI's route with the body parsed by `parse_json`: every router uses it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            return await handler(_JsonRequest(request.scope, request.receive))

        return guarded
