"""The API's reference page, served whole from this package: Swagger UI 5 (which reads
OpenAPI 3.1) comes from the `fastapi-offline` wheel, so `/docs` works where no CDN can be
reached. (No ReDoc: its page fetches its logo from a CDN.)"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

FILES = Path(fastapi_offline.__file__).parent / "static"  # the wheel's copies of the assets
ASSETS = "/docs/assets"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"
INDEX = {"service": "Interlock", "console": "/ui/", "docs": "/docs",
         "openapi": "/openapi.json", "health": "/healthz"}


def install_reference(app: FastAPI) -> None:
    """`/docs` (no CDN), a front door at `/` and the browser's favicon."""
    app.mount(ASSETS, StaticFiles(directory=FILES), name="reference-assets")
    spec, title = app.openapi_url or "/openapi.json", f"{app.title} API"

    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=spec, title=title, swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png", oauth2_redirect_url=OAUTH2_REDIRECT)

    def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    def index() -> JSONResponse:
        return JSONResponse(INDEX)

    def favicon() -> RedirectResponse:
        return RedirectResponse(f"{ASSETS}/favicon.png", status_code=308)

    for path, endpoint in (("/docs", docs), (OAUTH2_REDIRECT, oauth2_redirect),
                           ("/", index), ("/favicon.ico", favicon)):
        app.add_api_route(path, endpoint, include_in_schema=False)
